// An append larger than one transaction, cut into parts whose results are joined for the caller.

/// Cuts `rows` into parts of at most `size`, each with a completion; `completion` runs once:
/// with the parts' results joined in order when all succeeded, or with the first failure.
func splitAppend<Row, Outcome>(_ rows: [Row], by size: Int,
                               _ completion: @escaping (Result<[Outcome], StoreError>) -> Void)
    -> [([Row], (Result<[Outcome], StoreError>) -> Void)] {
    let size = max(size, 1)
    if rows.count <= size { return [(rows, completion)] }
    let starts = Array(stride(from: 0, to: rows.count, by: size))
    let join = PartsJoin<Outcome>(starts.count)
    return starts.enumerated().map { i, start in
        (Array(rows[start..<min(start + size, rows.count)]), { result in
            guard !join.failed else { return }
            switch result {
            case .failure(let error):
                join.failed = true
                completion(.failure(error))
            case .success(let outcomes):
                join.parts[i] = outcomes
                join.remaining -= 1
                if join.remaining == 0 { completion(.success(join.parts.flatMap { $0! })) }
            }
        })
    }
}

/// The parts of a split append, joined: their results in order, or the first failure.
private final class PartsJoin<Outcome> {
    var parts: [[Outcome]?]
    var remaining: Int
    var failed = false
    init(_ n: Int) { parts = Array(repeating: nil, count: n); remaining = n }
}
