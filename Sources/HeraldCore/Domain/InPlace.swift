// A zero-size field that lets a hot struct's public initializer build it in place.

/// A stored field of no size (`var inPlace = InPlace()`) that gives a struct a memberwise
/// initializer whose labels differ from its public initializer's, so that the public one can
/// delegate to it (`self.init(…, inPlace: InPlace())`).
///
/// Why: Swift 6.3 -O builds a struct that a hand-written initializer sets field by field in a
/// temporary, then copies it whole into the caller's slot and destroys the temporary — every
/// string and array in it retained and released once more, for every row of the hot path. The
/// compiler's memberwise initializer builds it in place. A struct whose public initializer
/// already has other labels than its fields needs no tag: it delegates to the memberwise
/// initializer directly (`Delivery`).
public struct InPlace: Hashable, Sendable {
    @inlinable public init() {}
}
