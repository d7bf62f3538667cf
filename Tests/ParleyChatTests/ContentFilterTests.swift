import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyStore
import ParleyWire
import Testing

/// The blocklists' regular expressions and matching (fast), and the content filter on both
/// engines: a refused message writes nothing, a masked one is written masked.
struct ContentFilterTests {
    private func matches(_ pattern: String, _ text: String) throws -> [String] {
        let regex = try SafeRegex(pattern)
        let folded = FoldedText(text)
        var found: [String] = []
        var from = 0
        while from <= folded.count, let range = regex.firstMatch(in: folded, from: from) {
            var scalars = String.UnicodeScalarView()
            for value in folded.original[range] { scalars.append(Unicode.Scalar(value) ?? "?") }
            found.append(String(scalars))
            from = range.isEmpty ? range.upperBound + 1 : range.upperBound
        }
        return found
    }

    @Test func regularExpressionsMatchLikeRE2IgnoringCase() throws {
        #expect(try matches("sp[a@]m+", "SPAM and sp@mmm but not spa") == ["SPAM", "sp@mmm"])
        #expect(try matches("\\bcat\\b", "cat concat cat!") == ["cat", "cat"])
        #expect(try matches("a|ab", "ab") == ["a"], "the first alternative wins, as in RE2 and Perl")
        #expect(try matches("a+?", "aaa") == ["a", "a", "a"])
        #expect(try matches("x{2,3}", "xxxxxxx") == ["xxx", "xxx"])
        #expect(try matches("^free", "free free") == ["free"])
        #expect(try matches("money$", "money money") == ["money"])
        #expect(try matches("(?:buy|sell) now", "SELL NOW, buy now") == ["SELL NOW", "buy now"])
        #expect(try matches("[^a-z ]+", "abc 123 déf") == ["123", "é"])
        #expect(try matches("\\d{3}-\\d{4}", "call 555-1234") == ["555-1234"])
        #expect(try matches("ÉTÉ", "été") == ["été"], "case folds beyond ASCII")
        #expect(try matches("a.c", "a\u{1F600}c") == ["a\u{1F600}c"], "a dot is one scalar")
    }

    @Test(arguments: ["(a)\\1", "(?=x)", "(?!x)", "(?<=x)", "(?i)x", "a**", "*a", "a{101}", "a{3,2}", "(", "a)", "[a", "\\", "[[:alpha:]]",
                      "\\q", "a++", String(repeating: "a", count: 257), "(?P<n>x)"])
    func patternsThatNeedBacktrackingOrAreMalformedAreRefused(_ pattern: String) {
        #expect(throws: SafeRegexError.self) { try SafeRegex(pattern) }
    }

    @Test func aPatternThatWouldTakeLongBacktrackingIsLinearHere() throws {
        // (a+)+$ against "aaaa…b" is the classic catastrophic case for a backtracking engine.
        let regex = try SafeRegex("(?:a+)+$")
        let text = FoldedText(String(repeating: "a", count: 20_000) + "b")
        let started = ContinuousClock.now
        #expect(regex.firstMatch(in: text) == nil)
        #expect(ContinuousClock.now - started < .seconds(5), "linear, not exponential")
        #expect(throws: SafeRegexError.self) { try SafeRegex("(?:(?:a{100}){100}){100}") }
    }

    @Test func patternsThatMatchNothingAtAllAreKnown() throws {
        #expect(try SafeRegex("a*").matchesEmpty && SafeRegex("\\b").matchesEmpty && SafeRegex("x|").matchesEmpty)
        #expect(try !SafeRegex("a+").matchesEmpty && !SafeRegex("^x").matchesEmpty)
    }

    @Test func wordsMatchWholeAndMaskingKeepsTheRest() throws {
        let filter = try CompiledFilter([
            Blocklist(name: "hard", words: ["scam"], regexes: [], mode: .reject, reason: "no scams here", updatedAt: Date()),
            Blocklist(name: "soft", words: ["darn", "heck no"], regexes: ["f+o+o+"], mode: .mask, reason: nil, updatedAt: Date()),
        ])
        #expect(filter.check("Is this a SCAM?") == .rejected(reason: "no scams here"))
        #expect(filter.check("scampi is fine") == .clean, "whole words only")
        #expect(filter.check("Darn it, heck  no! ffoo") == .masked("**** it, ****  **! ****"))
        #expect(filter.check("darnit heck yes") == .clean)
        #expect(try filter.apply(to: .markdown("**darn**")) == .markdown("********"), "the word masked, the Markdown around it kept")
        var photo = Attachment(attachmentID: "a_1")
        photo.caption = "darn view"
        guard case .photo(let masked) = try filter.apply(to: .photo(photo)) else { Issue.record("not a photo"); return }
        #expect(masked.caption == "**** view")
        #expect(throws: ChatError.contentRejected("no scams here")) { try filter.apply(to: .text("scam")) }
        #expect(try filter.apply(to: .system("scam")) == .system("scam"), "the app's own notices are not filtered")
    }

    // MARK: - On the engines

    private func backend(_ harness: ChatHarness) async throws -> ServerApp {
        // The harness's app ("test") as its backend, for the server API's calls.
        ServerApp(app: harness.app, name: "test", caller: try await harness.chat.backend.systemCaller(app: harness.app.id))
    }

    private func count(_ harness: ChatHarness, _ sql: SQL) async throws -> Int {
        try await harness.store.read { db in try db.fetchValue(Int.self, sql) ?? -1 }
    }

    @Test func aRefusedMessageWritesNothing_andAMaskedOneIsWrittenMasked() async throws {
        let harness = try await ChatHarness.make(hooks: [WebhookHook()], configure: { $0.webhooksAllowPrivate = true })
        defer { harness.tearDown() }
        let chat = harness.chat
        let server = try await backend(harness)
        _ = try await chat.webhooks.create(server, CreateWebhookRequest(url: "http://127.0.0.1:9/h", events: [WebhookEventType(.messageCreated),
                                                                                                             WebhookEventType(.messageEdited)]))
        let (ana, _) = try await harness.register("ana")
        _ = try await harness.register("bob")
        let room = try await chat.createConversation(ana, CreateConversationRequest(kind: .group, members: ["bob"], title: "g")).0.id
        _ = try await chat.contentFilters.setBlocklist(server, name: "spam", SetBlocklistRequest(words: ["buy followers"], regexes: ["cheap\\s+pills?"],
                                                                                              mode: .reject, reason: "no spam, please"))
        _ = try await chat.contentFilters.setBlocklist(server, name: "mild", SetBlocklistRequest(words: ["darn"], mode: .mask))
        let before = (try await count(harness, "SELECT count(*) FROM message"), try await count(harness, "SELECT count(*) FROM event"),
                      try await count(harness, "SELECT count(*) FROM outbox"))

        await #expect(throws: ChatError.contentRejected("no spam, please")) {
            try await chat.send(ana, to: room, SendMessageRequest(clientID: "s1", content: .text("Buy  FOLLOWERS today")))
        }
        await #expect(throws: ChatError.contentRejected("no spam, please")) {
            try await chat.sendToUsers(ana, SendToUsersRequest(to: ["bob"], clientID: "s2", content: .text("cheap pills")))
        }
        let after = (try await count(harness, "SELECT count(*) FROM message"), try await count(harness, "SELECT count(*) FROM event"),
                     try await count(harness, "SELECT count(*) FROM outbox"))
        #expect(after == before, "no row, no event, no webhook or push row")

        let masked = try await chat.send(ana, to: room, SendMessageRequest(clientID: "m1", content: .text("darn, the train"))).0
        #expect(masked.content == .text("****, the train"))
        #expect(try await chat.search(ana, query: "darn", conversation: nil, limit: nil).messages.isEmpty, "the masked word is not indexed")
        // An edit is filtered like a send, and a refused edit leaves the message as it was.
        await #expect(throws: ChatError.contentRejected("no spam, please")) {
            try await chat.edit(ana, conversation: room, message: masked.id, EditMessageRequest(content: .text("cheap pill")))
        }
        #expect(try await chat.message(ana, conversation: room, message: masked.id).content == .text("****, the train"))
        #expect(try await chat.message(ana, conversation: room, message: masked.id).editedAt == nil)

        // Lists are the app's: limits, names and patterns are checked.
        await #expect(throws: ChatError.self) {
            try await chat.contentFilters.setBlocklist(server, name: "bad", SetBlocklistRequest(regexes: ["(a)\\1"], mode: .reject))
        }
        await #expect(throws: ChatError.self) {
            try await chat.contentFilters.setBlocklist(server, name: "empty", SetBlocklistRequest(regexes: ["x*"], mode: .reject))
        }
        await #expect(throws: ChatError.self) {
            try await chat.contentFilters.setBlocklist(server, name: "no spaces", SetBlocklistRequest(words: ["x"], mode: .reject))
        }
        #expect(try await chat.contentFilters.blocklists(server).blocklists.map(\.name) == ["mild", "spam"])
        try await chat.contentFilters.deleteBlocklist(server, name: "spam")
        _ = try await chat.send(ana, to: room, SendMessageRequest(clientID: "s3", content: .text("cheap pills")))
    }

    @Test func anAppHasAtMostTenListsOfAThousandWordsAndFiftyPatternsAndARefusedListChangesNothing() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let server = try await backend(harness)
        let words = (0..<ContentFilters.wordsPerList).map { "word\($0)" }
        _ = try await chat.contentFilters.setBlocklist(server, name: "full", SetBlocklistRequest(words: words, mode: .mask))
        #expect(await code { _ = try await chat.contentFilters.setBlocklist(server, name: "over", SetBlocklistRequest(words: words + ["one more"], mode: .mask)) }
                == "invalid_request")
        let patterns = (0..<ContentFilters.regexesPerList).map { "x\($0)y" }
        _ = try await chat.contentFilters.setBlocklist(server, name: "patterns", SetBlocklistRequest(regexes: patterns, mode: .reject))
        #expect(await code { _ = try await chat.contentFilters.setBlocklist(server, name: "more", SetBlocklistRequest(regexes: patterns + ["z+q"], mode: .reject)) }
                == "invalid_request")
        for index in 2..<ContentFilters.listsPerApp {
            _ = try await chat.contentFilters.setBlocklist(server, name: "list\(index)", SetBlocklistRequest(words: ["w\(index)"], mode: .reject))
        }
        #expect(await code { _ = try await chat.contentFilters.setBlocklist(server, name: "eleventh", SetBlocklistRequest(words: ["w"], mode: .reject)) }
                == "conflict")
        // Replacing one of the ten is still allowed; the refused ones left nothing behind.
        _ = try await chat.contentFilters.setBlocklist(server, name: "list2", SetBlocklistRequest(words: ["w2", "w2b"], mode: .reject))
        let names = try await chat.contentFilters.blocklists(server).blocklists.map(\.name)
        #expect(names.count == ContentFilters.listsPerApp && !names.contains("eleventh") && !names.contains("over") && !names.contains("more"))
        #expect(try await chat.contentFilters.blocklists(server).blocklists.first { $0.name == "full" }?.words.count == ContentFilters.wordsPerList)
    }
}
