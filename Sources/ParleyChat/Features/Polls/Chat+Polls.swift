import Foundation
import ParleyStore
package import ParleyWire

// Polls (issue 33): a message whose content is a question and its options; the server keeps
// every member's vote (`poll_vote`) and the counts (`message.poll`, canonical JSON, rewritten
// by each vote), so no client can forge a count. A vote is an annotation: a `poll.voted`
// event with a position and no seq, like a reaction (decision 0021).

/// Polls: votes counted by the server, and closing.
package struct Polls: ChatFeature {
    package let core: Chat
}

extension Chat {
    /// Polls: votes counted by the server, and closing.
    package var polls: Polls { Polls(core: self) }
}

extension Polls {
    /// Sets the caller's vote in a poll to `options` (indexes), replacing any earlier one;
    /// an empty list takes it back. Voting as before changes nothing and appends no event.
    ///
    /// - Returns: the message with the new counts and the caller's votes, and whether it changed.
    /// - Throws: 400 for an index out of range, a repeated one, or several in a single-choice
    ///   poll, or a message that is no poll; 404; 409 `poll_closed` once closed;
    ///   409 `message_deleted`.
    package func vote(_ caller: Caller, conversation id: ConversationID, message messageID: MessageID, options: [Int]) async throws -> (Message, changed: Bool) {
        guard Set(options).count == options.count else { throw ChatError.invalid("options names an option twice") }
        let chosen = options.sorted()
        let now = nowMilliseconds
        return try await run {
            try await write(in: id) { tx in
                let access = try Chat.access(tx, caller: caller, id: id, for: .react)
                let (_, key) = try Chat.messageRow(tx, access: access, id: messageID)
                let (poll, results) = try Polls.lockedPoll(tx, key: key)
                guard !results.isClosed(poll, at: Chat.date(now)) else { throw ChatError.pollClosed }
                guard chosen.allSatisfy({ poll.options.indices.contains($0) }) else {
                    throw ChatError.invalid("options are indexes 0–\(poll.options.count - 1) of the poll's options")
                }
                guard poll.multipleChoice || chosen.count <= 1 else {
                    throw ChatError.invalid("this poll takes one option; give one index (or none to take the vote back)")
                }
                let before = try tx.fetchAll("""
                    SELECT option_index FROM poll_vote WHERE message_id = \(key) AND user_id = \(caller.userKey) ORDER BY option_index
                    """).map { Int(try $0.get("option_index", as: Int64.self)) }
                guard before != chosen else { return (try Chat.reload(tx, access: access, key: key, caller: caller), false) }
                try tx.execute("DELETE FROM poll_vote WHERE message_id = \(key) AND user_id = \(caller.userKey)")
                for option in chosen {
                    try tx.execute("""
                        INSERT INTO poll_vote (message_id, user_id, option_index, created_at) VALUES (\(key), \(caller.userKey), \(option), \(now))
                        """)
                }
                let counted = try Polls.count(tx, message: key, poll: poll, closedAt: results.closedAt)
                try tx.execute("UPDATE message SET poll = \(try Chat.canonicalJSON(counted)) WHERE id = \(key)")
                // In an anonymous poll the event names nobody, for members and webhooks alike.
                let voter = poll.anonymous ? nil : caller.userKey
                try tx.append(conversation: access.key, kind: .pollVoted, actor: voter, message: key, now: now)
                return (try Chat.reload(tx, access: access, key: key, caller: caller), true)
            }
        }
    }

    /// Closes a poll (its author, or a moderator): it takes no more votes and its counts are
    /// final. Closing a closed poll changes nothing.
    ///
    /// - Throws: 403 for anyone else; 400 for a message that is no poll; 404; 409 `message_deleted`.
    package func close(_ caller: Caller, conversation id: ConversationID, message messageID: MessageID) async throws -> (Message, changed: Bool) {
        let now = nowMilliseconds
        return try await run {
            try await write(in: id) { tx in
                let access = try Chat.access(tx, caller: caller, id: id, for: .editOwnMessage)
                let (row, key) = try Chat.messageRow(tx, access: access, id: messageID)
                try access.require(try row.get("m_author_key", as: Int64.self) == caller.userKey ? .editOwnMessage : .moderate)
                let (_, results) = try Polls.lockedPoll(tx, key: key)
                guard results.closedAt == nil else { return (try Chat.reload(tx, access: access, key: key, caller: caller), false) }
                var closed = results
                closed.closedAt = Chat.date(now)
                try tx.execute("UPDATE message SET poll = \(try Chat.canonicalJSON(closed)) WHERE id = \(key)")
                try tx.append(conversation: access.key, kind: .pollClosed, actor: caller.userKey, message: key, now: now)
                return (try Chat.reload(tx, access: access, key: key, caller: caller), true)
            }
        }
    }
}

extension Polls {
    /// A poll's results before anyone voted, as stored; nil for content that is no poll.
    static func initialResults(_ content: MessageContent) throws -> String? {
        guard case .poll(let poll) = content else { return nil }
        return try Chat.canonicalJSON(PollResults(options: poll.options.map { _ in
            PollOptionResult(votes: 0, voterIDs: poll.anonymous ? nil : [])
        }, voterCount: 0))
    }

    /// The poll of the message `key` (found visible to the caller already) and its results,
    /// with the message row locked (PostgreSQL) so two nodes' votes count one after the other.
    static func lockedPoll(_ tx: any Database, key: Int64) throws -> (PollContent, PollResults) {
        let lock: SQL = tx.dialect == .postgres ? " FOR UPDATE" : ""
        guard let row = try tx.fetchOne("SELECT deleted_at, content, poll FROM message WHERE id = \(key)" + lock) else {
            throw ChatError.messageNotFound
        }
        guard try row.get("deleted_at", as: Int64?.self) == nil else { throw ChatError.messageDeleted }
        let decoder = JSONDecoder()
        guard let content = try row.get("content", as: String?.self),
              case .poll(let poll) = try decoder.decode(MessageContent.self, from: Data(content.utf8)),
              let stored = try row.get("poll", as: String?.self) else {
            throw ChatError.invalid("that message is not a poll")
        }
        return (poll, try decoder.decode(PollResults.self, from: Data(stored.utf8)))
    }

    /// The counts from the votes themselves, and who voted for what unless the poll is anonymous.
    static func count(_ db: any Database, message key: Int64, poll: PollContent, closedAt: Date?) throws -> PollResults {
        var options = poll.options.map { _ in PollOptionResult(votes: 0, voterIDs: poll.anonymous ? nil : []) }
        for row in try db.fetchAll("""
            SELECT option_index, count(*) AS votes FROM poll_vote WHERE message_id = \(key) GROUP BY option_index
            """) {
            let index = Int(try row.get("option_index", as: Int64.self))
            if options.indices.contains(index) { options[index].votes = Int(try row.get("votes", as: Int64.self)) }
        }
        if !poll.anonymous {
            for index in options.indices where options[index].votes > 0 {
                options[index].voterIDs = try db.fetchAll("""
                    SELECT u.public_id FROM poll_vote v JOIN account u ON u.id = v.user_id
                    WHERE v.message_id = \(key) AND v.option_index = \(index) ORDER BY v.created_at, v.user_id LIMIT \(Limits.pollVotersListed)
                    """).map { UserID(rawValue: try $0.get("public_id")) }
            }
        }
        let voters = try db.fetchValue(Int64.self, "SELECT count(DISTINCT user_id) FROM poll_vote WHERE message_id = \(key)") ?? 0
        return PollResults(options: options, voterCount: Int(voters), closedAt: closedAt)
    }
}
