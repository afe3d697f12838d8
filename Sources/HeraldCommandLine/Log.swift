// Progress and errors of the command-line tools, on stderr.
import Foundation

/// Progress and errors go to stderr; stdout carries only results.
public enum Log {
    public static func info(_ message: String) {
        FileHandle.standardError.write(Data(("herald: " + message + "\n").utf8))
    }
}
