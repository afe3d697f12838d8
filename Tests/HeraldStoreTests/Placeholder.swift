import Testing
@Suite struct StorePlaceholderTests { @Test func builds() {} }
