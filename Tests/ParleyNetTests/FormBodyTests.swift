import Testing
import ParleyNet

/// `application/x-www-form-urlencoded` bodies, as Alamofire and HTML forms send them.
@Suite struct FormBodyTests {
    struct SignUp: Decodable, Equatable {
        var username: String
        var password: String
        var displayName: String?
        var remember: Bool?
        var age: Int?
    }

    enum Shade: String, Decodable { case light, dark }
    struct Themed: Decodable { var shade: Shade }
    struct Nested: Decodable { var profile: [String: String] }

    @Test func decodesFlatFieldsWithPlusAndPercentEscapes() throws {
        let form = try FormBody(parsing: Array("username=ana%40example.com&password=correct+horse&displayName=Ren%C3%A9&remember=1&age=42".utf8))
        #expect(try form.decode(SignUp.self) == SignUp(username: "ana@example.com", password: "correct horse", displayName: "René",
                                                       remember: true, age: 42))
    }

    @Test func missingOptionalFieldsAreNilAndEmptyPiecesAreSkipped() throws {
        let form = try FormBody(parsing: Array("&username=ana&&password=x&".utf8))
        #expect(try form.decode(SignUp.self) == SignUp(username: "ana", password: "x", displayName: nil, remember: nil, age: nil))
        #expect(try FormBody(parsing: Array("flag".utf8)).fields == ["flag": ""])
    }

    @Test func stringEnumsComeFromTheirNames() throws {
        #expect(try FormBody(parsing: Array("shade=dark".utf8)).decode(Themed.self).shade == .dark)
        #expect(throws: FormBodyError.nested(field: "shade")) { try FormBody(parsing: Array("shade=blue".utf8)).decode(Themed.self) }
    }

    @Test func refusesWhatIsNotAStrictForm() {
        #expect(throws: FormBodyError.badPercentEncoding) { try FormBody(parsing: Array("a=%4".utf8)) }
        #expect(throws: FormBodyError.badPercentEncoding) { try FormBody(parsing: Array("a=%zz".utf8)) }
        #expect(throws: FormBodyError.badPercentEncoding) { try FormBody(parsing: Array("a=%".utf8)) }
        #expect(throws: FormBodyError.notUTF8) { try FormBody(parsing: Array("a=%FF".utf8)) }
        #expect(throws: FormBodyError.emptyName) { try FormBody(parsing: Array("=x".utf8)) }
        #expect(throws: FormBodyError.repeatedField("a")) { try FormBody(parsing: Array("a=1&a=2".utf8)) }
        let many = (0...FormBody.maxFields).map { "f\($0)=1" }.joined(separator: "&")
        #expect(throws: FormBodyError.tooManyFields(FormBody.maxFields)) { try FormBody(parsing: Array(many.utf8)) }
    }

    @Test func wrongTypesAndNestingAreNamed() {
        #expect(throws: FormBodyError.wrongType(field: "age", expected: "a whole number")) {
            try FormBody(parsing: Array("username=a&password=b&age=old".utf8)).decode(SignUp.self)
        }
        #expect(throws: FormBodyError.wrongType(field: "remember", expected: "true, false, 1 or 0")) {
            try FormBody(parsing: Array("username=a&password=b&remember=yes".utf8)).decode(SignUp.self)
        }
        #expect(throws: FormBodyError.nested(field: "profile")) { try FormBody(parsing: Array("profile=x".utf8)).decode(Nested.self) }
    }
}
