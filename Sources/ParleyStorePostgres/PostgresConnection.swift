import CParleyPQ
import Foundation
import ParleyStore
import ParleyLog
import ParleySync

/// How many times a connection waited for the server.
/// A count shared between threads: round trips, or statements answered from reads ahead.
final class RoundTrips: Sendable {
    private let value = LockedValue(0)
    func count() { value.withLock { $0 += 1 } }
    var total: Int { value.withLock { $0 } }
}

/// One libpq connection, used by one thread at a time.
///
/// Statements are prepared once per connection (named `p1`, `p2`, …, keyed by their text and
/// the types of their parameters) and run with `PQexecPrepared`. Parameters go in binary
/// (`int8`, `float8`, `text`, `bytea`), so no value is ever parsed out of text and a string
/// with a NUL byte is refused by the server instead of being cut short; results come back in
/// text and are converted by column type.
final class PostgresConnection: Database {
    private var handle: OpaquePointer?
    private let conninfo: String
    var dialect: SQLDialect { .postgres }

    private struct StatementKey: Hashable {
        var text: String
        var types: [Oid]
    }
    private struct Prepared {
        var name: String
        var columns: ColumnNames?
    }
    private var prepared: [StatementKey: Prepared] = [:]
    private var preparedCount = 0
    private static let maxPrepared = 512

    /// Every time this connection waited for the server (a round trip), for tests and the benchmark.
    let roundTrips = RoundTrips()

    /// Whether this connection was ever made (so a new one is a reconnect, and says so).
    private var everConnected = false

    /// Connects to `conninfo` (a `postgres://` URL or `key=value` pairs).
    ///
    /// - Throws: ``StoreError/cannotOpen(_:)`` when the server cannot be reached or refuses,
    ///   with libpq's reason.
    init(conninfo: String) throws {
        self.conninfo = conninfo
        do {
            try connect()
        } catch StoreError.retryable(let message) {
            throw StoreError.cannotOpen(message)
        }
    }

    /// A connection to `conninfo` not made yet: its first use connects (a writer started while
    /// the server is briefly unreachable).
    init(unconnected conninfo: String) {
        self.conninfo = conninfo
    }

    deinit {
        if let handle { PQfinish(handle) }
    }

    /// True when the last thing the connection did left it usable.
    var isConnected: Bool { handle.map { PQstatus($0) == CONNECTION_OK } ?? false }

    /// Opens the connection anew (after the server restarted or the network dropped it).
    ///
    /// - Throws: ``StoreError/retryable(_:)``: the server may come back.
    func connect() throws {
        let again = handle != nil || everConnected
        if let handle { PQfinish(handle) }
        handle = nil
        prepared.removeAll()
        pending.removeAll()
        earlierFailure = nil
        unanswered = false
        let log = Logger.process.labelled("parley.postgresql")
        guard let fresh = PQconnectdb(conninfo) else { throw StoreError.retryable("libpq could not allocate a connection") }
        guard PQstatus(fresh) == CONNECTION_OK else {
            let message = Self.message(fresh)
            PQfinish(fresh)
            let error = StoreError.retryable("cannot connect to PostgreSQL: \(message)")
            if again { log.failed("cannot reconnect to PostgreSQL; retrying with the next write", error) }
            throw error
        }
        if again { log.info("reconnected to PostgreSQL") }
        everConnected = true
        handle = fresh
        // Notices (a savepoint released twice, an index that already exists) are not errors.
        try run("SET client_min_messages = warning")
    }

    /// Runs text with no parameters (BEGIN, COMMIT, SET, several statements at once).
    func run(_ text: String) throws {
        guard let handle else { throw StoreError.retryable("not connected to PostgreSQL") }
        readUnanswered()
        if !pending.isEmpty, let queued = try flush(then: []) { throw queued.error }
        roundTrips.count()
        let result = PQexec(handle, text)
        defer { PQclear(result) }
        try check(result, text: text)
    }

    @discardableResult
    func execute(_ sql: SQL) throws -> Int {
        let result = try send(sql)
        defer { PQclear(result) }
        return Int(String(cString: PQcmdTuples(result))) ?? 0
    }

    func fetchAll(_ sql: SQL) throws -> [Row] {
        if !readAhead.isEmpty, let rows = takeReadAhead(sql) { return rows }
        let (result, key) = try sendKeyed(sql)
        defer { PQclear(result) }
        return rows(of: result, key: key)
    }

    /// Sends every statement in one pipeline, after anything queued, and waits once for all
    /// of them (``Database/fetchEach(_:)``).
    func fetchEach(_ statements: [SQL]) throws -> [[Row]] {
        guard !statements.isEmpty else { return [] }
        guard statements.count > 1 || !pending.isEmpty else { return try statements.map { try fetchAll($0) } }
        guard let handle else { throw StoreError.retryable("not connected to PostgreSQL") }
        let keys = try statements.map { try sendInPipeline($0, kept: true, handle: handle) }
        let (queued, kept) = try syncPipeline(handle: handle)
        defer { for result in kept { PQclear(result) } }
        if let queued { throw failure(queued) }
        guard kept.count == statements.count else {
            throw StoreError.retryable("lost the connection to PostgreSQL: not every statement was answered")
        }
        for (result, statement) in zip(kept, keys) { try check(result, text: statement.text) }
        return zip(kept, keys).map { rows(of: $0, key: $1) }
    }

    // MARK: - Reads ahead

    /// Reads sent for a batch's writes before they ran (``readAhead(_:)``): by the write's
    /// place in the batch, each statement with its rows, until the write runs it.
    private var readAhead: [Int: [(sql: SQL, rows: [Row])]] = [:]

    /// Counts the statements answered from what was read ahead (the store's, for its tests
    /// and `/metrics`).
    var answeredAhead: RoundTrips?

    /// Sends the reads of the writes at `reads`' places in the batch in one wait, and keeps
    /// each one's rows to answer that write's identical statement when it runs
    /// (``WriteDeclaration``). The engine calls it at the start of a batch, when nothing is
    /// pending.
    func readAhead(_ reads: [(write: Int, sql: SQL)]) throws {
        readAhead.removeAll()
        let answers = try fetchEach(reads.map(\.sql))
        for (read, rows) in zip(reads, answers) { readAhead[read.write, default: []].append((read.sql, rows)) }
    }

    /// The rows read ahead for the current write's `sql`, once; nil when there are none (it
    /// is then sent as any statement is).
    private func takeReadAhead(_ sql: SQL) -> [Row]? {
        guard var reads = readAhead[currentWrite], let index = reads.firstIndex(where: { $0.sql == sql }) else { return nil }
        let rows = reads.remove(at: index).rows
        readAhead[currentWrite] = reads.isEmpty ? nil : reads
        answeredAhead?.count()
        return rows
    }

    /// Drops what was read ahead: the batch ended, or rolled back and its writes run again.
    func forgetReadAhead() { readAhead.removeAll() }

    /// The rows of a query's `result`, the column names cached with its prepared statement.
    private func rows(of result: OpaquePointer, key: StatementKey) -> [Row] {
        let columns = PQnfields(result)
        let names: ColumnNames
        if let cached = prepared[key]?.columns {
            names = cached
        } else {
            names = ColumnNames((0..<columns).map { String(cString: PQfname(result, $0)) })
            prepared[key]?.columns = names
        }
        let types = (0..<columns).map { PQftype(result, $0) }
        let count = PQntuples(result)
        var rows: [Row] = []
        rows.reserveCapacity(Int(count))
        for row in 0..<count {
            var values: [DatabaseValue] = []
            values.reserveCapacity(Int(columns))
            for column in 0..<columns {
                values.append(Self.value(result, row: row, column: column, type: types[Int(column)]))
            }
            rows.append(Row(values, columns: names))
        }
        return rows
    }

    // MARK: - Statements

    private func send(_ sql: SQL) throws -> OpaquePointer {
        try sendKeyed(sql).result
    }

    /// Runs one statement and returns its result. Statements queued before it (``enqueue(_:)``)
    /// travel in the same pipeline, so they and it cost one round trip; a queued statement's
    /// failure is thrown here, and then this statement did not run.
    private func sendKeyed(_ sql: SQL) throws -> (result: OpaquePointer, key: StatementKey) {
        guard let handle else { throw StoreError.retryable("not connected to PostgreSQL") }
        readUnanswered()
        if !pending.isEmpty {
            let key = try sendInPipeline(sql, kept: true, handle: handle)
            let (queued, kept) = try syncPipeline(handle: handle)
            let result = kept.first
            if let queued {
                if let result { PQclear(result) }
                throw failure(queued)
            }
            guard let result else { throw StoreError.retryable("lost the connection to PostgreSQL: no answer to (\(key.text.prefix(120)))") }
            return (try checked(result, text: key.text), key)
        }
        let (text, bindings) = sql.rendered { "$\($0)" }
        let key = StatementKey(text: text, types: bindings.map(Self.type(of:)))
        noteChange(text)
        let name = try preparedName(key, handle: handle, pipelined: false)
        roundTrips.count()
        let result: OpaquePointer? = withParameters(bindings) { count, values, lengths, formats in
            PQexecPrepared(handle, name, count, values, lengths, formats, 0)
        }
        guard let result else { throw StoreError.retryable("PostgreSQL: \(Self.message(handle))") }
        return (try checked(result, text: text), key)
    }

    /// What a wait of the current write throws when a statement queued in its pipeline failed:
    /// the current write's own error, or, when an earlier write's statement failed (the
    /// current one's were skipped with it), a retryable one, the earlier failure kept for the
    /// engine (``takeEarlierFailure()``).
    private func failure(_ queued: QueuedFailure) -> StoreError {
        guard queued.write < currentWrite else { return queued.error }
        if earlierFailure == nil { earlierFailure = queued }
        return StoreError.retryable("a write committed together with this one failed; nothing of this one was stored")
    }

    /// `result` when it succeeded; else cleared, and its error thrown.
    private func checked(_ result: OpaquePointer, text: String) throws -> OpaquePointer {
        do {
            try check(result, text: text)
        } catch {
            PQclear(result)
            throw error
        }
        return result
    }

    /// The prepared statement's name, preparing it first when it is new: at once, or in the
    /// pipeline (`pipelined`), where its answer is read with the statements after it.
    private func preparedName(_ key: StatementKey, handle: OpaquePointer, pipelined: Bool) throws -> String {
        if let known = prepared[key] { return known.name }
        if prepared.count >= Self.maxPrepared {
            // DEALLOCATE in the pipeline, after the statements that use the old names.
            if pipelined {
                guard PQsendQueryParams(handle, "DEALLOCATE ALL", 0, nil, nil, nil, nil, 0) == 1 else { throw lostPipeline(handle) }
                pending.append(Pending(text: "DEALLOCATE ALL", isControl: false, write: currentWrite))
            } else {
                try run("DEALLOCATE ALL")
            }
            prepared.removeAll(keepingCapacity: true)
        }
        preparedCount += 1
        let name = "p\(preparedCount)"
        if pipelined {
            guard PQsendPrepare(handle, name, key.text, Int32(key.types.count), key.types) == 1 else { throw lostPipeline(handle) }
            pending.append(Pending(text: key.text, isControl: false, write: currentWrite, prepares: key))
        } else {
            roundTrips.count()
            let result = PQprepare(handle, name, key.text, Int32(key.types.count), key.types)
            defer { PQclear(result) }
            try check(result, text: key.text)
        }
        prepared[key] = Prepared(name: name, columns: nil)
        return name
    }

    /// Calls `body` with every parameter in binary: integers and doubles big-endian, text as
    /// its UTF-8 bytes, all in one buffer (a zero-length value still gets a non-NULL pointer,
    /// or it would be NULL).
    private func withParameters<R>(_ bindings: [DatabaseValue],
                                   _ body: (Int32, [UnsafePointer<CChar>?], [Int32], [Int32]) -> R) -> R {
        var storage: [UInt8] = []
        var offsets: [Int] = []
        var lengths: [Int32] = []
        for value in bindings {
            offsets.append(storage.count)
            let bytes = Self.binary(value)
            lengths.append(Int32(bytes.count))
            storage += bytes
        }
        storage.append(0)
        let formats = [Int32](repeating: 1, count: bindings.count)
        return storage.withUnsafeBufferPointer { buffer in
            let base = UnsafeRawPointer(buffer.baseAddress)
            let values: [UnsafePointer<CChar>?] = bindings.indices.map { index in
                bindings[index] == .null ? nil : base.map { ($0 + offsets[index]).assumingMemoryBound(to: CChar.self) }
            }
            return body(Int32(values.count), values, lengths, formats)
        }
    }

    // MARK: - Pipeline

    /// A statement sent in pipeline mode whose answer has not been read yet.
    private struct Pending {
        var text: String
        /// Sent by the engine after the queued ones (a savepoint, COMMIT), not by the write.
        var isControl: Bool
        /// The write that sent it (``currentWrite`` then).
        var write: Int
        /// The statement this prepares, when it is a Prepare: forgotten again if it did not run
        /// (a failure earlier in the pipeline skips it).
        var prepares: StatementKey? = nil
        /// Whether its result goes back to the caller, who reads and clears it (a query sent
        /// with the wait, ``fetchEach(_:)``), instead of being checked here.
        var kept = false
    }
    /// What was sent and not yet answered, in order (empty outside pipeline mode).
    private var pending: [Pending] = []

    /// The write whose statements are being sent: its place in the engine's batch, set before
    /// each write runs.
    var currentWrite = 0 {
        didSet { currentWriteChanged = false }
    }

    /// Whether the current write sent a statement that may have changed something: anything
    /// but a `SELECT`. A write that fails before its first such statement leaves the
    /// transaction as it found it, so a batch without savepoints goes on without it.
    private(set) var currentWriteChanged = false

    private func noteChange(_ text: String) {
        if !currentWriteChanged && !Self.isSelect(text) { currentWriteChanged = true }
    }

    /// Whether `text` is a `SELECT` (its first word, after any white space, in any case). A
    /// `SELECT` may still take a lock or draw from a sequence; neither is undone by a rollback
    /// to a savepoint either, and both end with the transaction.
    static func isSelect(_ text: String) -> Bool {
        // Every statement of a write passes here: no set or array is built for it.
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x0A || byte == 0x09 || byte == 0x0D }
        let word = text.utf8.drop(while: isSpace).prefix(7)
        guard word.count >= 6, zip(word, "select".utf8).allSatisfy({ $0 | 0x20 == $1 }) else { return false }
        guard let seventh = word.dropFirst(6).first else { return true }
        return isSpace(seventh) || seventh == UInt8(ascii: "(")
    }

    /// Whether the transaction failed: a statement was refused, and the server ignores
    /// everything until it is rolled back (read after every answer owed was read).
    var transactionFailed: Bool {
        guard let handle else { return true }
        return PQtransactionStatus(handle) == PQTRANS_INERROR
    }

    /// Whether a statement was sent and not yet answered.
    var owesAnswers: Bool { !pending.isEmpty }

    /// Batches still to commit with a savepoint per write (a batch that was run again makes
    /// the next ones safe first: docs/decisions/0026, part 5).
    var batchesWithSavepoints = 0

    /// A queued statement's failure, and the write that queued it.
    struct QueuedFailure {
        var write: Int
        var error: StoreError
    }

    /// A failure of the write before ``currentWrite`` that one of the current write's waits
    /// found (the current write's statements were skipped with it), until the engine takes it.
    private var earlierFailure: QueuedFailure?

    /// Takes the failure of an earlier write found while the current one ran.
    func takeEarlierFailure() -> QueuedFailure? {
        defer { earlierFailure = nil }
        return earlierFailure
    }

    /// Whether a write before the current one still waits for the answer to a statement it queued.
    var owesForEarlierWrite: Bool { pending.contains { !$0.isControl && $0.write < currentWrite } }

    /// Sends a statement whose answer the write does not need before its next statement, without
    /// waiting for it (libpq's pipeline mode): it is answered with the next statement that
    /// waits, or when the write ends (docs/decisions/0026, part 5). Its failure fails the write
    /// all the same, only later.
    @discardableResult
    func enqueue(_ sql: SQL) throws -> Int? {
        guard let handle else { throw StoreError.retryable("not connected to PostgreSQL") }
        try sendInPipeline(sql, kept: false, handle: handle)
        return nil
    }

    /// Sends a statement of the current write in pipeline mode (entered first if need be),
    /// prepared first if it is new, without reading its answer; `kept`: its result goes back to
    /// the caller (``Pending/kept``).
    @discardableResult
    private func sendInPipeline(_ sql: SQL, kept: Bool, handle: OpaquePointer) throws -> StatementKey {
        readUnanswered()
        if pending.isEmpty {
            guard PQenterPipelineMode(handle) == 1 else { throw StoreError.retryable("PostgreSQL: \(Self.message(handle))") }
        }
        let (text, bindings) = sql.rendered { "$\($0)" }
        let key = StatementKey(text: text, types: bindings.map(Self.type(of:)))
        noteChange(text)
        let name = try preparedName(key, handle: handle, pipelined: true)
        guard sendPrepared(name, bindings, handle: handle) else { throw lostPipeline(handle) }
        pending.append(Pending(text: text, isControl: false, write: currentWrite, kept: kept))
        return key
    }

    /// Sends the engine's own `statements` (no parameters, one statement each: RELEASE,
    /// SAVEPOINT, COMMIT) after the queued ones and waits once for all of them.
    ///
    /// - Returns: the first queued statement's failure and the write that queued it, or nil.
    ///   After a failure the `statements` did not run and the transaction is aborted: roll back
    ///   to a savepoint.
    /// - Throws: when one of `statements` fails or the connection is lost.
    func flush(then statements: [String]) throws -> QueuedFailure? {
        guard let handle else { throw StoreError.retryable("not connected to PostgreSQL") }
        readUnanswered()
        guard !pending.isEmpty else {
            try run(statements.joined(separator: "; "))
            return nil
        }
        for statement in statements {
            guard PQsendQueryParams(handle, statement, 0, nil, nil, nil, nil, 0) == 1 else { throw lostPipeline(handle) }
            pending.append(Pending(text: statement, isControl: true, write: currentWrite))
        }
        let (queued, _) = try syncPipeline(handle: handle)
        return queued
    }

    /// Sends the engine's own `statements` (no parameters, one statement each) without waiting:
    /// they are answered with the next wait. For statements that cannot fail while the
    /// connection lives (a savepoint's release after a write whose every statement was answered).
    func enqueueControl(_ statements: [String]) throws {
        guard let handle else { throw StoreError.retryable("not connected to PostgreSQL") }
        readUnanswered()
        if pending.isEmpty {
            guard PQenterPipelineMode(handle) == 1 else { throw StoreError.retryable("PostgreSQL: \(Self.message(handle))") }
        }
        for statement in statements {
            guard PQsendQueryParams(handle, statement, 0, nil, nil, nil, nil, 0) == 1 else { throw lostPipeline(handle) }
            pending.append(Pending(text: statement, isControl: true, write: currentWrite))
        }
    }

    /// Sends the engine's own `statements` after whatever is queued, and the sync point that
    /// makes the server run them now, without reading the answers: the connection's next
    /// statement reads them first (they are in its socket by then). For a read's COMMIT, whose
    /// outcome changes nothing the read returned.
    func sendWithoutWaiting(_ statements: [String]) throws {
        guard let handle else { throw StoreError.retryable("not connected to PostgreSQL") }
        readUnanswered()
        try enqueueControl(statements)
        pending.removeAll()
        guard PQpipelineSync(handle) == 1 else { throw lostPipeline(handle) }
        unanswered = true
    }

    /// Whether answers up to a sync point were sent for and not read (``sendWithoutWaiting(_:)``).
    private var unanswered = false

    /// Reads and drops the answers ``sendWithoutWaiting(_:)`` left, and leaves pipeline mode.
    func readUnanswered() {
        guard unanswered, let handle else { return }
        unanswered = false
        while true {
            guard let result = PQgetResult(handle) else {
                if PQstatus(handle) != CONNECTION_OK { break }
                continue
            }
            let status = PQresultStatus(result)
            PQclear(result)
            if status == PGRES_PIPELINE_SYNC { break }
        }
        PQexitPipelineMode(handle)
    }

    /// Reads every answer still owed before rolling back (the write failed anyway).
    ///
    /// - Returns: the first failure among them and the write that queued it (an earlier write's
    ///   means that write failed too), or nil.
    @discardableResult
    func abandonPending() -> QueuedFailure? {
        readUnanswered()
        guard let handle, !pending.isEmpty else { return nil }
        return (try? syncPipeline(handle: handle))?.queued
    }

    private func sendPrepared(_ name: String, _ bindings: [DatabaseValue], handle: OpaquePointer) -> Bool {
        withParameters(bindings) { count, values, lengths, formats in
            PQsendQueryPrepared(handle, name, count, values, lengths, formats, 0)
        } == 1
    }

    /// Ends the pipeline with a sync point and reads every answer up to it, leaving pipeline mode.
    ///
    /// - Returns: the first failure of a statement the write queued (later ones were skipped),
    ///   and the results of the statements sent ``Pending/kept``, in order, for the caller to
    ///   read and clear (a failure among those is theirs to find, not `queued`).
    /// - Throws: when an engine statement (``Pending/isControl``) fails, or the connection is lost.
    private func syncPipeline(handle: OpaquePointer) throws -> (queued: QueuedFailure?, kept: [OpaquePointer]) {
        let sent = pending
        pending.removeAll(keepingCapacity: true)
        guard PQpipelineSync(handle) == 1 else { throw lostPipeline(handle) }
        roundTrips.count()
        var results: [OpaquePointer] = []
        results.reserveCapacity(sent.count)
        while true {
            guard let result = PQgetResult(handle) else {
                // The end of one statement's answers; a dead connection ends them all.
                if PQstatus(handle) != CONNECTION_OK { break }
                continue
            }
            if PQresultStatus(result) == PGRES_PIPELINE_SYNC {
                PQclear(result)
                break
            }
            results.append(result)
        }
        PQexitPipelineMode(handle)
        var queued: QueuedFailure?
        var control: (any Error)?
        var kept: [OpaquePointer] = []
        for (index, result) in results.enumerated() {
            if index < sent.count, sent[index].kept {
                kept.append(result)
                continue
            }
            defer { PQclear(result) }
            guard index < sent.count else { continue }
            if let key = sent[index].prepares, PQresultStatus(result) != PGRES_COMMAND_OK { prepared[key] = nil }
            guard PQresultStatus(result) != PGRES_PIPELINE_ABORTED else { continue }
            do {
                try check(result, text: sent[index].text)
            } catch let error as StoreError where !sent[index].isControl {
                if queued == nil { queued = QueuedFailure(write: sent[index].write, error: error) }
            } catch {
                if control == nil { control = error }
            }
        }
        if results.count != sent.count || PQstatus(handle) != CONNECTION_OK {
            for entry in sent[min(results.count, sent.count)...] { if let key = entry.prepares { prepared[key] = nil } }
            for result in kept { PQclear(result) }
            throw StoreError.retryable("lost the connection to PostgreSQL: \(Self.message(handle))")
        }
        if let control, queued == nil {
            for result in kept { PQclear(result) }
            throw control
        }
        return (queued, kept)
    }

    /// A pipeline that could not be sent: the connection is gone.
    private func lostPipeline(_ handle: OpaquePointer) -> StoreError {
        pending.removeAll()
        return StoreError.retryable("lost the connection to PostgreSQL: \(Self.message(handle))")
    }

    /// The parameter's PostgreSQL type: int8, float8, text, bytea; a NULL's is left to the server.
    private static func type(of value: DatabaseValue) -> Oid {
        switch value {
        case .null: 0
        case .integer: 20
        case .real: 701
        case .text: 25
        case .blob: 17
        }
    }

    private static func binary(_ value: DatabaseValue) -> [UInt8] {
        switch value {
        case .null: []
        case .integer(let number): withUnsafeBytes(of: number.bigEndian, Array.init)
        case .real(let number): withUnsafeBytes(of: number.bitPattern.bigEndian, Array.init)
        case .text(let string): Array(string.utf8)
        case .blob(let bytes): bytes
        }
    }

    /// One result cell, by the column's type: booleans and integers as integers, floats and
    /// fractional numerics as doubles, bytea as bytes, everything else as text.
    private static func value(_ result: OpaquePointer, row: Int32, column: Int32, type: Oid) -> DatabaseValue {
        if PQgetisnull(result, row, column) != 0 { return .null }
        let length = Int(PQgetlength(result, row, column))
        guard let raw = PQgetvalue(result, row, column) else { return .null }
        let bytes = UnsafeRawBufferPointer(start: raw, count: length)
        switch type {
        case 16: return .integer(bytes.first == UInt8(ascii: "t") ? 1 : 0)
        case 20, 21, 23, 26: return Int64(String(decoding: bytes, as: UTF8.self)).map(DatabaseValue.integer) ?? .null
        case 700, 701: return Double(String(decoding: bytes, as: UTF8.self)).map(DatabaseValue.real) ?? .null
        case 1700:
            let text = String(decoding: bytes, as: UTF8.self)
            if let integer = Int64(text) { return .integer(integer) }
            return Double(text).map(DatabaseValue.real) ?? .null
        case 17: return .blob(hexDecoded(bytes))
        default: return .text(String(decoding: bytes, as: UTF8.self))
        }
    }

    /// bytea's text output (`\x` then two hex digits a byte).
    private static func hexDecoded(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        guard bytes.count >= 2, bytes[0] == UInt8(ascii: "\\"), bytes[1] == UInt8(ascii: "x") else { return Array(bytes) }
        func nibble(_ c: UInt8) -> UInt8 {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: 0
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count - 2) / 2)
        var index = 2
        while index + 1 < bytes.count {
            out.append(nibble(bytes[index]) << 4 | nibble(bytes[index + 1]))
            index += 2
        }
        return out
    }

    // MARK: - Errors

    /// Throws the result's error, classified: constraint violations (class 23), retryable
    /// failures (serialization, deadlock, lock timeout, shutdown, a lost connection) and the rest.
    private func check(_ result: OpaquePointer?, text: String) throws {
        guard let handle else { throw StoreError.retryable("not connected to PostgreSQL") }
        let status = result.map(PQresultStatus) ?? PGRES_FATAL_ERROR
        switch status {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY: return
        default: break
        }
        let state = result.flatMap { PQresultErrorField($0, Int32(UInt8(ascii: "C"))) }.map { String(cString: $0) } ?? ""
        let detail = (result.flatMap { PQresultErrorField($0, Int32(UInt8(ascii: "M"))) }.map { String(cString: $0) } ?? Self.message(handle))
            + " (in: \(text.prefix(120)))"
        if PQstatus(handle) != CONNECTION_OK { throw StoreError.retryable("lost the connection to PostgreSQL: \(detail)") }
        throw Self.classify(state: state, detail: detail)
    }

    /// The store error for an SQLSTATE.
    static func classify(state: String, detail: String) -> StoreError {
        switch state {
        case "40001", "40P01", "55P03", "57P01", "57P02", "57P03", "53300": .retryable(detail)
        case _ where state.hasPrefix("08"): .retryable(detail)
        case "53100": .full(detail)
        case _ where state.hasPrefix("23"): .statement(message: detail, constraint: true)
        default: .statement(message: detail, constraint: false)
        }
    }

    private static func message(_ handle: OpaquePointer) -> String {
        String(cString: PQerrorMessage(handle)).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
