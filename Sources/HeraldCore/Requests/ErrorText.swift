// Client text shown back in error titles and warnings: short enough to read, whatever was sent.

/// The most Unicode scalars of a client's value an error text shows.
public let errorTextEchoLimit = 60

/// A value the client sent, as an error title or warning shows it: whole when short, else its
/// first `limit` Unicode scalars (default `errorTextEchoLimit`) and "…". A line may be 64 KiB, and an unknown op,
/// a field name, a timestamp or a level of that size echoed whole made a title of that size.
/// Counted in scalars, not characters: one character can hold any number of combining marks.
public func clipped(_ s: String, to limit: Int = errorTextEchoLimit) -> String {
    let scalars = s.unicodeScalars
    guard scalars.count > limit else { return s }
    var shown = String.UnicodeScalarView()
    shown.append(contentsOf: scalars.prefix(limit))
    return String(shown) + "…"
}

/// `clipped(s)` in double quotes (calendar errors quote the way their titles always have).
func quote(_ s: String) -> String {
    "\"" + clipped(s) + "\""
}
