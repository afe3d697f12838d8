import Testing
@Suite struct RuntimePlaceholderTests { @Test func builds() {} }
