// Herald's version: what `herald --version` prints and the hello reply's "server" names.
public enum HeraldVersion {
    public static let number = "0.1.0"
    /// The hello reply's "server" and the first word of `herald --version`'s line: `herald/0.1.0`.
    public static let serverName = "herald/\(number)"
}
