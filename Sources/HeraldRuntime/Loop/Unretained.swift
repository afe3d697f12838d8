// A `weak` reference without the side table, for objects the loop retains on every request.

/// Holds `object` without retaining it, and is cleared by the object when its deinit starts: a
/// closure or a connection that outlives the object then finds nil, as `[weak self]` gave.
///
/// Why: a weak reference gives its object a side table, and from then on every retain and
/// release of that object takes the runtime's slow path. The service (weakly referenced by its
/// timers' closures and by every connection) and each connection (by its deadline timer and its
/// consumer streams) are retained several times a request, so those slow paths would be a
/// visible share of the loop's time.
/// Everything runs on the loop's thread, so clearing in deinit leaves no window.
final class Unretained<Object: AnyObject> {
    unowned(unsafe) var object: Object?

    init() {}
}
