import Foundation
import ParleyNet
import ParleyWire

// Issue 19's benchmarks: a reaction against a message on the write path, and a history page
// whose messages carry reactions, mentions, pins and thread counts against one whose carry none,
// in the same run on the same server. See docs/benchmarks.md.

/// `annotations`: six timed phases on one server —
/// 1. sends: `--senders` keep-alive connections each sending text to one of `--conversations` groups;
/// 2. reactions: the same connections each toggling reactions on one message of its group
///    (ten emoji added, then the same ten taken back: every request changes something);
/// 3. drafts: the same connections each saving its draft in its group, every save a newer one
///    (issue 33: what a device sends as its user pauses typing);
/// 4. votes: the same connections each voting in a poll of its group, every vote a different
///    answer from the last (issue 33: each rewrites the poll's counts on its message);
/// 5. history: latest-50 pages on one connection, of a group whose 50 newest messages have no
///    reactions, then of one whose 50 newest have three reactions each, a mention, every fifth
///    a pin and every other a thread of two replies (reply counts on the page).
/// 6. (after the history pages) sends with a link: as 1, each text with a different link, so
///    each leaves a link-preview job the node works on meanwhile (issue 33: the send must not
///    wait for its preview);
func runAnnotations(_ options: Options, group: EventLoopGroup) async throws {
    guard let url = options.string("url"), let appKey = options.string("app-key") else {
        throw BenchError("annotations needs --url http://HOST:PORT and --app-key KEY")
    }
    let senders = try options.int("senders", 50)
    let conversationCount = try options.int("conversations", 10)
    let duration = Double(try options.int("duration", 5))
    let setup = SetupClient(base: url, appKey: appKey)
    let run = String(UInt32.random(in: 0...UInt32.max), radix: 36)
    progress("annotations: registering \(senders) senders in \(conversationCount) groups…")
    var clients: [SetupClient] = []
    for index in 0..<senders { clients.append(try await setup.signedIn("bench\(run)s\(index)")) }
    var conversations: [String] = []
    for index in 0..<conversationCount {
        let members = stride(from: index, to: senders, by: conversationCount).map { "bench\(run)s\($0)" }.filter { $0 != "bench\(run)s\(index)" }
        let conversation = try await clients[index].call("POST", "/v1/conversations",
                                                           body: CreateConversationRequest(kind: .group, members: members, title: "bench \(index)"),
                                                           as: Conversation.self)
        conversations.append(conversation.id.rawValue)
    }
    // One message per sender to react to, in the sender's group.
    var targets: [String] = []
    for (index, client) in clients.enumerated() {
        let sent = try await client.call("POST", "/v1/conversations/\(conversations[index % conversationCount])/messages",
                                         body: SendMessageRequest(clientID: "\(run)-t\(index)", content: .text("react to me")), as: Message.self)
        targets.append(sent.id.rawValue)
    }
    let (host, _) = try hostAndPort(url)
    let tokens = clients.map { $0.token ?? "" }
    let groups = conversations
    let reacted = targets

    progress("annotations: sends, \(senders) connections for \(Int(duration)) s…")
    let sends = try await runLoad(url: url, connections: senders, duration: duration, group: group) { connection, index in
        let body = #"{"clientId":"\#(run)-\#(connection)-\#(index)","content":{"type":"text","text":"benchmark message \#(index) from sender \#(connection)"}}"#
        return httpRequest("POST", "/v1/conversations/\(groups[connection % conversationCount])/messages",
                           host: host, appKey: appKey, token: tokens[connection], body: body)
    }
    let emoji = ["👍", "❤️", "😂", "🎉", "😮", "😢", "🙏", "👀", "🔥", "✅"]
    let encoded = emoji.map { $0.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? $0 }
    progress("annotations: reactions, \(senders) connections for \(Int(duration)) s…")
    let reactions = try await runLoad(url: url, connections: senders, duration: duration, group: group) { connection, index in
        let path = "/v1/conversations/\(groups[connection % conversationCount])/messages/\(reacted[connection])/reactions"
        let which = index % emoji.count
        if (index / emoji.count) % 2 == 0 {
            return httpRequest("POST", path, host: host, appKey: appKey, token: tokens[connection], body: #"{"emoji":"\#(emoji[which])"}"#)
        }
        return httpRequest("DELETE", path + "/" + encoded[which], host: host, appKey: appKey, token: tokens[connection])
    }
    // Each save a millisecond newer than the last one of its connection: every one is written.
    let draftBase = Int64(Date().timeIntervalSince1970 * 1000) - 86_400_000
    progress("annotations: drafts, \(senders) connections for \(Int(duration)) s…")
    let drafts = try await runLoad(url: url, connections: senders, duration: duration, group: group) { connection, index in
        let at = Date(timeIntervalSince1970: Double(draftBase + Int64(index)) / 1000)
        let body = #"{"clientId":"\#(run)-d\#(connection)","text":"a draft being written, now \#(index) characters long","updatedAt":"\#(WireCoding.formatDate(at))"}"#
        return httpRequest("PUT", "/v1/conversations/\(groups[connection % conversationCount])/draft",
                           host: host, appKey: appKey, token: tokens[connection], body: body)
    }

    // One poll per group; each connection's vote alternates between two answers, so every
    // request changes the counts.
    var polls: [String] = []
    for (index, conversation) in conversations.enumerated() {
        let poll = try await clients[index].call("POST", "/v1/conversations/\(conversation)/messages",
                                                 body: SendMessageRequest(clientID: "\(run)-p\(index)", content: .poll(PollContent(
                                                     question: "Which one?", options: ["one", "two", "three"]))), as: Message.self)
        polls.append(poll.id.rawValue)
    }
    let pollIDs = polls
    progress("annotations: votes, \(senders) connections for \(Int(duration)) s…")
    let votes = try await runLoad(url: url, connections: senders, duration: duration, group: group) { connection, index in
        httpRequest("PUT", "/v1/conversations/\(groups[connection % conversationCount])/messages/\(pollIDs[connection % conversationCount])/poll/vote",
                    host: host, appKey: appKey, token: tokens[connection], body: #"{"options":[\#(index % 2)]}"#)
    }

    // History: two groups of the same three people, 50 messages each; in the second every
    // message gets three reactions, one mention, and every fifth a pin.
    progress("annotations: filling two groups of 50 messages for the history pages…")
    let people = Array(clients.prefix(3))
    var pages: [String] = []
    for decorated in [false, true] {
        let members = (1..<people.count).map { "bench\(run)s\($0)" }
        let conversation = try await people[0].call("POST", "/v1/conversations",
                                                    body: CreateConversationRequest(kind: .group, members: members, title: "history \(decorated)"),
                                                    as: Conversation.self)
        for index in 0..<50 {
            let text = decorated ? "message \(index) for @bench\(run)s1 with a few more words" : "message \(index) for bench\(run)s1 with a few more words"
            let sent = try await people[0].call("POST", "/v1/conversations/\(conversation.id.rawValue)/messages",
                                                body: SendMessageRequest(clientID: "\(run)-h\(decorated)-\(index)", content: .text(text)), as: Message.self)
            guard decorated else { continue }
            for (number, person) in people.enumerated() {
                _ = try await person.call("POST", "/v1/conversations/\(conversation.id.rawValue)/messages/\(sent.id.rawValue)/reactions",
                                          body: ReactionRequest(emoji: emoji[number]), as: Message.self)
            }
            if index % 5 == 0 {
                _ = try await person0Pin(people[0], conversation: conversation.id.rawValue, message: sent.id.rawValue)
            }
            // Every other message opens a thread of two replies (in the thread only).
            if index % 2 == 0 {
                for reply in 0..<2 {
                    _ = try await people[1 + reply].call("POST", "/v1/conversations/\(conversation.id.rawValue)/messages",
                                                         body: SendMessageRequest(clientID: "\(run)-t\(index)-\(reply)", content: .text("a reply"),
                                                                                  threadID: sent.id), as: Message.self)
                }
            }
        }
        pages.append("/v1/conversations/\(conversation.id.rawValue)/messages?limit=50")
    }
    var history: [(latencies: [UInt64], failures: [Int: Int], lastFailure: String, elapsed: Double)] = []
    for path in pages {
        progress("annotations: latest-50 pages of \(path == pages[1] ? "the decorated" : "the plain") group, 1 connection, \(Int(duration)) s…")
        let token = people[1].token ?? ""   // a reader with reactions of their own on the page
        _ = try await runLoad(url: url, connections: 1, duration: 1, group: group) { _, _ in
            httpRequest("GET", path, host: host, appKey: appKey, token: token)
        }
        history.append(try await runLoad(url: url, connections: 1, duration: duration, group: group) { _, _ in
            httpRequest("GET", path, host: host, appKey: appKey, token: token)
        })
    }
    // Last, so the previews still being made when it ends touch no other phase: the same
    // connections send text with a link, each a different one, so every send leaves a preview
    // job and every job is a fetch (of a TEST-NET address, which the outbound check refuses
    // without touching the network: the node's own cost of a preview, not a site's time).
    progress("annotations: sends with a link, \(senders) connections for \(Int(duration)) s…")
    let linked = try await runLoad(url: url, connections: senders, duration: duration, group: group) { connection, index in
        let body = #"{"clientId":"\#(run)-l\#(connection)-\#(index)","content":{"type":"text","text":"benchmark message \#(index) see https://192.0.2.1/a/\#(run)/\#(connection)/\#(index)"}}"#
        return httpRequest("POST", "/v1/conversations/\(groups[connection % conversationCount])/messages",
                           host: host, appKey: appKey, token: tokens[connection], body: body)
    }
    let rate = { (result: (latencies: [UInt64], failures: [Int: Int], lastFailure: String, elapsed: Double)) in
        Double(result.latencies.count) / result.elapsed
    }
    for (name, result) in [("sends", sends), ("reactions", reactions), ("drafts", drafts), ("votes", votes), ("plain pages", history[0]),
                           ("decorated pages", history[1]), ("sends with a link", linked)]
    where !result.failures.isEmpty {
        progress("annotations: \(name) failures by status \(result.failures); last: \(result.lastFailure)")
    }
    report(options, [
        "benchmark": "annotations", "senders": "\(senders)",
        "sends_per_s": String(format: "%.0f", rate(sends)),
        "send_p99_ms": String(format: "%.2f", percentile(sends.latencies, 0.99) / 1000),
        "reactions_per_s": String(format: "%.0f", rate(reactions)),
        "reaction_p99_ms": String(format: "%.2f", percentile(reactions.latencies, 0.99) / 1000),
        "reaction_vs_send": String(format: "%.2f", rate(reactions) / max(rate(sends), 1)),
        "drafts_per_s": String(format: "%.0f", rate(drafts)),
        "draft_p99_ms": String(format: "%.2f", percentile(drafts.latencies, 0.99) / 1000),
        "draft_vs_send": String(format: "%.2f", rate(drafts) / max(rate(sends), 1)),
        "votes_per_s": String(format: "%.0f", rate(votes)),
        "vote_p99_ms": String(format: "%.2f", percentile(votes.latencies, 0.99) / 1000),
        "vote_vs_send": String(format: "%.2f", rate(votes) / max(rate(sends), 1)),
        "plain_pages_per_s": String(format: "%.0f", rate(history[0])),
        "plain_p50_ms": String(format: "%.3f", percentile(history[0].latencies, 0.5) / 1000),
        "decorated_pages_per_s": String(format: "%.0f", rate(history[1])),
        "decorated_p50_ms": String(format: "%.3f", percentile(history[1].latencies, 0.5) / 1000),
        "decorated_vs_plain": String(format: "%.2f", rate(history[1]) / max(rate(history[0]), 1)),
        "linked_sends_per_s": String(format: "%.0f", rate(linked)),
        "send_p50_ms": String(format: "%.2f", percentile(sends.latencies, 0.5) / 1000),
        "linked_p50_ms": String(format: "%.2f", percentile(linked.latencies, 0.5) / 1000),
        "linked_p99_ms": String(format: "%.2f", percentile(linked.latencies, 0.99) / 1000),
        "link_vs_send": String(format: "%.2f", rate(linked) / max(rate(sends), 1)),
        "errors": "\([sends, reactions, drafts, votes, history[0], history[1], linked].map { $0.failures.values.reduce(0, +) }.reduce(0, +))",
    ])
}

private func person0Pin(_ client: SetupClient, conversation: String, message: String) async throws -> Message {
    try await client.call("PUT", "/v1/conversations/\(conversation)/messages/\(message)/pin", body: [String: String](), as: Message.self)
}
