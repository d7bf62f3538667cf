import Foundation
import ParleyStore
import ParleySync
package import ParleyWire

extension Chat {
    /// Moves the caller's watermarks forward. Values behind the current ones change nothing;
    /// values past the conversation's last seq are clamped to it; reading implies delivery.
    ///
    /// Receipts gather (decision 0026, part 3): the first one to wait holds the door for
    /// ``Configuration/receiptGathering`` and then goes to the writer as one write for every
    /// receipt waiting by the time the writer begins it, of any member in any conversation,
    /// riding the writer's next batch for something else for up to
    /// ``Configuration/receiptRiding``; a member's receipts in one conversation in it become
    /// one move to their highest marks and one `receipt.updated`. Each call is answered, once
    /// that write has committed, with the watermarks it left; a call the write refused (not a
    /// member any more) gets its own error.
    ///
    /// - Throws: 400 for a negative value; 403 `not_member`; 404.
    package func updateReceipt(_ caller: Caller, conversation id: ConversationID, _ update: ReceiptUpdate) async throws -> Receipt {
        try await withCheckedThrowingContinuation { continuation in
            updateReceipt(caller, conversation: id, update) { continuation.resume(with: $0) }
        }
    }

    /// ``updateReceipt(_:conversation:_:)`` for a caller that does not wait in a task of its
    /// own (a socket's loop, decision 0026): `answer` is called once, on no particular thread,
    /// when the write that took the receipt has committed or failed.
    package func updateReceipt(_ caller: Caller, conversation id: ConversationID, _ update: ReceiptUpdate,
                               then answer: @escaping @Sendable (Result<Receipt, any Error>) -> Void) {
        guard update.deliveredSeq != nil || update.readSeq != nil else { return answer(.failure(ChatError.invalid("give deliveredSeq, readSeq or both"))) }
        guard (update.deliveredSeq ?? 0) >= 0, (update.readSeq ?? 0) >= 0 else { return answer(.failure(ChatError.invalid("seq values are not negative"))) }
        let key = ReceiptCoalescer.Key(user: caller.userKey, session: caller.sessionKey, asApp: caller.actsAsApp, conversation: id)
        // In a log of several shards, receipts gather per shard: each shard's go to its writer.
        let shard = logShards > 1 ? shard(of: id) : nil
        let (entry, leads) = receipts.coalescer(shard).enter(key, caller: caller, update)
        entry.whenSettled(answer)
        guard leads else { return }
        // One task per write, whatever the number of receipts in it.
        let gathering = configuration.receiptGathering
        Task {
            if gathering > .zero { try? await Task.sleep(for: gathering) }
            await writeReceipts(shard: shard)
        }
    }

    /// The gathered receipts' write: takes every receipt of the shard waiting as the writer
    /// begins it, moves each member's watermarks, and settles every call it took.
    private func writeReceipts(shard: Int?) async {
        let now = nowMilliseconds
        let receipts = receipts.coalescer(shard)
        // What this write took from the coalescer, kept if the store runs the body again.
        let taken = LockedValue<[ReceiptCoalescer.Waiting]?>(nil)
        do {
            try await run {
                // Rides the next write begun for something else, if one comes soon.
                try await write(inShard: shard, ridingWithin: configuration.receiptRiding) { [self] db in
                    // From here on, a new receipt starts a write of its own.
                    let batch = taken.withLock { taken in
                        if taken == nil { taken = receipts.takeAll() }
                        return taken ?? []
                    }
                    var traced: [Int64: String]? = traceRecorder.isOn ? [:] : nil
                    let accesses = try Chat.readAccesses(db, of: batch)
                    // On PostgreSQL the moves' statements go together, in one wait, once
                    // nothing read after them needs them done.
                    var deferred: [Transaction.SubjectAppend]? = db.dialect == .postgres ? [] : nil
                    let outcomes: [(Result<Receipt, any Error>, WatermarkMove?)] = try batch.indices.map { index in
                        let waiting = batch[index]
                        if accesses[index] == nil, let moves = deferred, !moves.isEmpty {
                            // This receipt reads its own access: the moves before it first.
                            try db.appendToSubjectsAndAuthors(moves)
                            deferred = []
                        }
                        do {
                            let (receipt, moved) = try Chat.moveWatermarks(db, caller: waiting.caller, conversation: waiting.key.conversation,
                                                                           access: try accesses[index]?.get(),
                                                                           to: waiting.update, now: now, traced: &traced, deferring: &deferred)
                            return (.success(receipt), moved)
                        } catch let error as ChatError {
                            // Refused before it wrote anything (moveWatermarks checks first):
                            // this call's answer, not the others'.
                            return (.failure(error), nil)
                        }
                    }
                    if let moves = deferred, !moves.isEmpty { try db.appendToSubjectsAndAuthors(moves) }
                    // Answered on the writer's thread as the commit returns, beside the
                    // receipt.updated events it publishes: the sockets' loops wake once for both.
                    // One trace row per conversation of the write, naming each device that moved its marks.
                    let steps = (traced ?? [:]).map { TraceRecorder.Row(position: 0, conversation: $0.key, step: "receipt", devices: $0.value, at: now) }
                    db.onCommit { [self] in
                        traceRecorder.record(steps)
                        for (waiting, (outcome, moved)) in zip(batch, outcomes) {
                            if let moved { noteDelivery(conversation: moved.conversation, from: moved.old, to: moved.new) }
                            waiting.answer.settle(outcome)
                        }
                    }
                }
            }
        } catch {
            // Nothing was written. If the write failed before the writer began it, its
            // receipts are still waiting: they get the same answer.
            let batch = taken.withLock { $0 } ?? receipts.takeAll()
            for waiting in batch { waiting.answer.settle(.failure(error)) }
        }
    }

    /// The access of the receipts of a write of several, read before any of them moves, in one
    /// statement per conversation and, on PostgreSQL, one wait for all of them
    /// (``accessesStatement(callers:id:)``, ``Database/fetchEach(_:)``), by index in `batch`.
    /// A move changes only its own member's row, so each is what the receipt's own read would
    /// have found. A member's second device in a conversation is not here: it reads its own,
    /// after the first one's move.
    static func readAccesses(_ db: Transaction, of batch: [ReceiptCoalescer.Waiting]) throws -> [Int: Result<Access, ChatError>] {
        guard batch.count > 1 else { return [:] }
        struct Place: Hashable { let conversation: ConversationID; let app: Int64 }
        var groups: [Place: [Int]] = [:]
        var order: [Place] = []
        for (index, waiting) in batch.enumerated() {
            let place = Place(conversation: waiting.key.conversation, app: waiting.caller.appID)
            if groups[place] == nil { order.append(place) }
            groups[place, default: []].append(index)
        }
        var found: [Int: Result<Access, ChatError>] = [:]
        var reads: [(place: Place, indices: [Int], statement: SQL)] = []
        for place in order {
            // A user's first device only: another reads after the first one moved.
            var users: Set<Int64> = []
            let indices = (groups[place] ?? []).filter { users.insert(batch[$0].caller.userKey).inserted }
            if let statement = try accessesStatement(callers: indices.map { batch[$0].caller }, id: place.conversation) {
                reads.append((place, indices, statement))
            } else {
                for index in indices { found[index] = .failure(.conversationNotFound) }
            }
        }
        let answers = try db.fetchEach(reads.map(\.statement))
        for (read, rows) in zip(reads, answers) {
            let accesses = try accesses(rows, db, callers: read.indices.map { batch[$0].caller }, id: read.place.conversation, for: .keepOwnState)
            for (index, access) in zip(read.indices, accesses) { found[index] = access }
        }
        return found
    }

    /// Moves one member's watermarks in one conversation to `update`'s marks, clamped, and
    /// appends the `receipt.updated` its devices and the authors it passed hear. Every check
    /// that can refuse it (a ``ChatError``) comes before its first statement that writes, so a
    /// refusal leaves the transaction as it found it for the other receipts in the write.
    /// `access`: the caller's access if it was read already in this transaction, else it is
    /// read here. `deferring`, when not nil (PostgreSQL), takes the move's statement for the
    /// caller to send with others (``Transaction/appendToSubjectsAndAuthors(_:)``) instead of
    /// sending it here.
    static func moveWatermarks(_ db: Transaction, caller: Caller, conversation id: ConversationID, access: Access? = nil,
                               to update: ReceiptUpdate, now: Int64, traced: inout [Int64: String]?,
                               deferring deferred: inout [Transaction.SubjectAppend]?) throws -> (Receipt, WatermarkMove?) {
        let access = try access ?? Chat.access(db, caller: caller, id: id, for: .keepOwnState)
        let read = min(update.readSeq ?? 0, access.lastSeq)
        let delivered = max(min(update.deliveredSeq ?? 0, access.lastSeq), read)
        // Read with the access, in this transaction: a receipt of the same member's other
        // device earlier in the same write is already in them.
        guard let old = access.watermarks else { throw ChatError.notMember }
        let new = (delivered: max(old.delivered, delivered), read: max(old.read, read))
        let receipt = Receipt(userID: caller.userID, deliveredSeq: new.delivered, readSeq: new.read)
        guard new != old else { return (receipt, nil) }
        // The trace's receipt step: this device moved the member's marks (docs/trace.md).
        if traced != nil {
            let entry = "\(caller.userKey):\(caller.sessionKey):\(delivered > old.delivered ? delivered : 0):\(read > old.read ? read : 0)"
            let earlier = traced?[access.key]
            traced?[access.key] = earlier.map { $0 + "," + entry } ?? entry
        }
        var payload = EventPayload()
        payload.deliveredSeq = new.delivered
        payload.readSeq = new.read
        // Built here, not read back after the write (decision 0026).
        let build = { (position: Int64, recipients: [Int64]?) -> AppendedEvent in
            let record = EventRecord(position: position, conversationID: access.id.rawValue, seq: nil, type: .receiptUpdated,
                                     actorID: caller.userID.rawValue, createdAt: now, userID: caller.userID.rawValue, payload: payload)
            var event = AppendedEvent(record: record, conversationKey: access.key, conversationKind: access.kind,
                                      userKey: caller.userKey, recipient: recipients?.first)
            event.alsoTo = Array(recipients?.dropFirst() ?? [])
            return event
        }
        let move: SQL = """
            UPDATE member SET delivered_seq = \(new.delivered), read_seq = \(new.read)
            WHERE conversation_id = \(access.key) AND user_id = \(caller.userKey)
            """
        let audience = Chat.receiptAudience(access: access, member: caller.userKey, from: old, to: new)
        // Stored with a position and no seq: see EventKind.receiptUpdated.
        if db.dialect == .postgres {
            // The move, the authors it passed, the event and its recipients: one statement, one wait.
            let append = Transaction.SubjectAppend(rows: "moved AS (\(move))", conversation: access.key, kind: .receiptUpdated,
                                                   actor: caller.userKey, subject: caller.userKey, audience: audience,
                                                   payload: payload, now: now, prebuilt: build)
            if deferred != nil { deferred?.append(append) } else { try db.appendToSubjectsAndAuthors([append]) }
        } else {
            try db.enqueue(move)
            let recipients = try db.recipients(audience, subject: caller.userKey)
            try db.append(conversation: access.key, kind: .receiptUpdated, actor: caller.userKey, user: caller.userKey,
                          payload: payload, now: now, recipients: recipients) { build($0, recipients) }
        }
        // In a public channel the author learns it through delivery.updated (Chat+Deliveries).
        guard access.kind == .public else { return (receipt, nil) }
        return (receipt, (access.key, (old.delivered, old.read), (new.delivered, new.read)))
    }

    /// A member's watermarks moving in a public channel, for the authors' delivery counts
    /// (``noteDelivery(conversation:from:to:)``).
    typealias WatermarkMove = (conversation: Int64, old: (delivered: Int64, read: Int64), new: (delivered: Int64, read: Int64))

    /// The most authors one receipt names; past it the receipt goes to every member.
    static let receiptAuthorsNamed = 32

    /// Who hears a member's watermarks move (``EventAudience/subjectAndAuthors``, decision
    /// 0028): the member's own devices and the members whose messages the move passed, from
    /// `old` to `new` — they show delivered and read, nobody else does. Every member in a
    /// direct chat, where that is everyone anyway, and when the authors are more than
    /// ``receiptAuthorsNamed`` or all the others; the member alone in a public channel, whose
    /// authors hear counts instead (decision 0017).
    static func receiptAudience(access: Access, member: Int64, from old: (delivered: Int64, read: Int64),
                                to new: (delivered: Int64, read: Int64)) -> Transaction.DecidedAudience {
        if access.kind == .public { return .subject }
        if access.memberCount <= 2 { return .everyone }
        return .subjectAndAuthors(authors: authorsPassed(access: access, member: member, from: old, to: new),
                                  most: receiptAuthorsNamed, memberCount: access.memberCount)
    }

    /// The members, other than `member`, whose messages a move of `member`'s watermarks from
    /// `old` to `new` passed: one column, `author`, each once.
    static func authorsPassed(access: Access, member: Int64, from old: (delivered: Int64, read: Int64),
                              to new: (delivered: Int64, read: Int64)) -> SQL {
        """
        SELECT DISTINCT m.author_id AS author FROM message m
        JOIN member mb ON mb.conversation_id = m.conversation_id AND mb.user_id = m.author_id
        WHERE m.conversation_id = \(access.key) AND m.author_id != \(member)
          AND ((m.seq > \(old.read) AND m.seq <= \(new.read)) OR (m.seq > \(old.delivered) AND m.seq <= \(new.delivered)))
        """
    }

    /// Every member's watermarks, a page at a time.
    package func receipts(_ caller: Caller, conversation id: ConversationID, limit: Int?, offset: Int?) async throws -> ReceiptList {
        let members = try await members(caller, id: id, limit: limit, offset: offset)
        return ReceiptList(receipts: members.members.map(\.receipt))
    }

    /// Who has one of the caller's messages: its status and the members it reached and who
    /// read it (at most 1,000 of each are listed). Only the author may ask.
    package func messageReceipts(_ caller: Caller, conversation id: ConversationID, message messageID: MessageID) async throws -> MessageReceipts {
        try await run {
            try await store.read { db in
                let access = try Chat.access(db, caller: caller, id: id, for: .read)
                let (row, _) = try Chat.messageRow(db, access: access, id: messageID)
                try access.require(try row.get("m_author_key", as: Int64.self) == caller.userKey ? .seeWhoHasOwnMessage : .seeWhoHasOthersMessage)
                let seq: Int64 = try row.get("m_seq")
                func users(_ column: SQL) throws -> [UserID] {
                    try db.fetchAll("""
                        SELECT u.public_id FROM member mb JOIN account u ON u.id = mb.user_id
                        WHERE mb.conversation_id = \(access.key) AND mb.user_id != \(caller.userKey) AND \(column) >= \(seq)
                        ORDER BY u.public_id LIMIT 1000
                        """).map { UserID(rawValue: try $0.get("public_id")) }
                }
                let others = access.memberCount - (access.role == nil ? 0 : 1)
                let deliveredTo = try users("mb.delivered_seq")
                let readBy = try users("mb.read_seq")
                let status: DeliveryStatus = others > 0 && readBy.count >= others ? .read
                    : others > 0 && deliveredTo.count >= others ? .delivered : .sent
                return MessageReceipts(status: status, deliveredTo: deliveredTo, readBy: readBy)
            }
        }
    }
}

/// Receipts waiting for the writer (decision 0026, part 3): one write takes every one of them;
/// a member's receipts in one conversation join into one entry with the highest marks, whose
/// calls all get that entry's answer.
/// The receipts waiting, one coalescer per shard of the log (one for a log of one shard).
final class ReceiptCoalescers: Sendable {
    private let byShard = LockedValue<[Int: ReceiptCoalescer]>([:])

    /// The shard's coalescer (nil: the one of a log of one shard).
    func coalescer(_ shard: Int?) -> ReceiptCoalescer {
        byShard.withLock { table in
            if let existing = table[shard ?? 0] { return existing }
            let made = ReceiptCoalescer()
            table[shard ?? 0] = made
            return made
        }
    }

    /// How many calls wait on entries in a conversation that no write has taken yet.
    func waitingCalls(in conversation: ConversationID) -> Int {
        byShard.withLock { Array($0.values) }.reduce(0) { $0 + $1.waitingCalls(in: conversation) }
    }
}

final class ReceiptCoalescer: Sendable {
    /// One member's receipts in one conversation, from one session (the caller's standing is
    /// the session's, so two sessions never share an entry).
    struct Key: Hashable, Sendable {
        var user: Int64
        var session: Int64
        var asApp: Bool
        var conversation: ConversationID
    }

    /// The answer every call of one entry gets, set once.
    final class Answer: Sendable {
        typealias Waiter = @Sendable (Result<Receipt, any Error>) -> Void
        private let state = LockedValue<(result: Result<Receipt, any Error>?, waiters: [Waiter])>((nil, []))

        func settle(_ result: Result<Receipt, any Error>) {
            let waiters = state.withLock { state -> [Waiter] in
                guard state.result == nil else { return [] }
                state.result = result
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter(result) }
        }

        /// Calls `waiter` with the answer, now if it is settled.
        func whenSettled(_ waiter: @escaping Waiter) {
            let settled = state.withLock { state -> Result<Receipt, any Error>? in
                if let result = state.result { return result }
                state.waiters.append(waiter)
                return nil
            }
            if let settled { waiter(settled) }
        }
    }

    /// One entry of the write: whose, which marks, and the answer its calls wait for.
    struct Waiting: Sendable {
        let key: Key
        let caller: Caller
        var update: ReceiptUpdate
        let answer: Answer
        /// The calls waiting on this entry.
        var calls = 1
    }

    /// The entries in arrival order (a write moves them in that order), and whether a call
    /// leads them to the writer.
    private let table = LockedValue((entries: [Waiting](), index: [Key: Int](), led: false))

    /// Joins the member's waiting entry, or adds one; `leads` is true for the call that must
    /// take the entries to the writer (the first since the last write took them).
    func enter(_ key: Key, caller: Caller, _ update: ReceiptUpdate) -> (answer: Answer, leads: Bool) {
        table.withLock { table in
            let leads = !table.led
            table.led = true
            if let at = table.index[key] {
                table.entries[at].update.deliveredSeq = Self.highest(table.entries[at].update.deliveredSeq, update.deliveredSeq)
                table.entries[at].update.readSeq = Self.highest(table.entries[at].update.readSeq, update.readSeq)
                table.entries[at].calls += 1
                return (table.entries[at].answer, leads)
            }
            let answer = Answer()
            table.index[key] = table.entries.count
            table.entries.append(Waiting(key: key, caller: caller, update: update, answer: answer))
            return (answer, leads)
        }
    }

    /// The writer has begun a write: every waiting entry, which later calls no longer join.
    func takeAll() -> [Waiting] {
        table.withLock { table in
            defer { table = ([], [:], false) }
            return table.entries
        }
    }

    /// How many calls wait on entries in a conversation that no write has taken yet.
    func waitingCalls(in conversation: ConversationID) -> Int {
        table.withLock { table in table.entries.filter { $0.key.conversation == conversation }.reduce(0) { $0 + $1.calls } }
    }

    private static func highest(_ a: Int64?, _ b: Int64?) -> Int64? {
        switch (a, b) {
        case (nil, nil): nil
        case (let a?, nil): a
        case (nil, let b?): b
        case (let a?, let b?): max(a, b)
        }
    }
}
