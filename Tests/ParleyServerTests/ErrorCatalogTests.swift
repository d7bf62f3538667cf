import Foundation
import ParleyWire
import Testing

/// Every error code the server answers is in one list (`ChatError.Code`), and the OpenAPI
/// spec, the HTTP layer and the code that throws all agree with it.
struct ErrorCatalogTests {
    private static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    private func read(_ path: String) throws -> String { try String(contentsOf: Self.root.appendingPathComponent(path), encoding: .utf8) }

    /// The Swift sources under `folder`, as (path, text).
    private func sources(_ folder: String) throws -> [(String, String)] {
        let base = Self.root.appendingPathComponent(folder)
        let files = FileManager.default.enumerator(atPath: base.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
        return try files.sorted().map { ("\(folder)/\($0)", try String(contentsOf: base.appendingPathComponent($0), encoding: .utf8)) }
    }

    @Test func theOpenAPIEnumIsTheCatalog() throws {
        let spec = try read("docs/openapi.yaml")
        let line = try #require(spec.split(separator: "\n").first { $0.contains("enum: [invalid_request") })
        let listed = line.split(separator: "[")[1].split(separator: "]")[0].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(listed == ChatError.Code.allCases.map(\.rawValue))
    }

    @Test func everyCodeHasOneStatusAndTheStaticsUseTheirCode() {
        #expect(Set(ChatError.Code.allCases.map(\.rawValue)).count == ChatError.Code.allCases.count)
        for error in [ChatError.uploadNotFound, .thumbnailNotFound, .storeUnavailable, .invalidSignature, .storageFull, .appNotFound] {
            #expect(ChatError.Code(rawValue: error.code)?.status == error.status, "\(error.code)")
        }
        #expect(ChatError.storeUnavailable.status == 503 && ChatError.storeUnavailable.isTemporary)
    }

    /// No error is made from literals outside ParleyWire (the SDK only rebuilds what a server
    /// sent), and every code the HTTP layer writes itself is in the catalog.
    @Test func noCodeIsWrittenOutsideTheCatalog() throws {
        let known = Set(ChatError.Code.allCases.map(\.rawValue))
        var offenders: [String] = []
        for folder in ["Sources/ParleyChat", "Sources/ParleyServer", "Sources/ParleyMedia", "Sources/ParleyPusher"] {
            for (path, text) in try sources(folder) where text.contains("ChatError(status:") { offenders.append(path) }
        }
        #expect(offenders.isEmpty, "ChatError(status:…) literals: make each a static in ChatError")
        let literal = try NSRegularExpression(pattern: #"code: "([a-z_]+)""#)
        var unknown: [String] = []
        for folder in ["Sources/ParleyNet", "Sources/ParleyServer", "Sources/ParleyChat", "Sources/ParleyPusher"] {
            for (path, text) in try sources(folder) {
                for match in literal.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                    guard let range = Range(match.range(at: 1), in: text) else { continue }
                    let code = String(text[range])
                    if !known.contains(code) { unknown.append("\(path): \(code)") }
                }
            }
        }
        #expect(unknown.isEmpty, "codes not in ChatError.Code: \(unknown)")
    }
}
