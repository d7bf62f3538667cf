import CParleySQLite
import Glibc
import ParleyStore

/// One SQLite connection, used by one thread at a time (opened with `SQLITE_OPEN_NOMUTEX`).
/// Prepared statements are cached by their SQL text, so a hot statement is compiled once.
final class SQLiteConnection: Database {
    let handle: OpaquePointer
    let path: String
    var dialect: SQLDialect { .sqlite }
    private var statements: [String: OpaquePointer] = [:]
    /// Each cached statement's column names, made once and shared by all its rows.
    private var columnNames: [OpaquePointer: ColumnNames] = [:]
    private static let maxCachedStatements = 256

    /// `SQLITE_TRANSIENT`: a function-pointer cast macro that does not import (PLATFORM.md §1).
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    init(path: String, readOnly: Bool) throws {
        var db: OpaquePointer?
        let flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX
        let status = sqlite3_open_v2(path, &db, flags, nil)
        guard status == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(db)
            throw StoreError.cannotOpen("\(path): \(message)")
        }
        handle = db
        self.path = path
        sqlite3_extended_result_codes(db, 1)
        // Another connection's checkpoint can hold a lock briefly; wait rather than fail.
        sqlite3_busy_timeout(db, 5_000)
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(handle)
    }

    /// Runs text with no parameters (pragmas, BEGIN/COMMIT, several statements at once).
    func run(_ text: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        let status = sqlite3_exec(handle, text, nil, nil, &message)
        if status != SQLITE_OK {
            let detail = message.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(handle))
            sqlite3_free(message)
            throw error(status, detail: "\(detail) (in: \(text.prefix(80)))")
        }
    }

    /// True outside a transaction (SQLite rolled back on its own after some errors).
    var isAutocommit: Bool { sqlite3_get_autocommit(handle) != 0 }

    @discardableResult
    func execute(_ sql: SQL) throws -> Int {
        let statement = try prepare(sql)
        defer { sqlite3_reset(statement) }
        var status = sqlite3_step(statement)
        while status == SQLITE_ROW { status = sqlite3_step(statement) }
        guard status == SQLITE_DONE else { throw error(status, sql: sql) }
        return Int(sqlite3_changes(handle))
    }

    func fetchAll(_ sql: SQL) throws -> [Row] {
        let statement = try prepare(sql)
        defer { sqlite3_reset(statement) }
        var rows: [Row] = []
        let columns = sqlite3_column_count(statement)
        let names = names(of: statement, count: columns)
        while true {
            let status = sqlite3_step(statement)
            if status == SQLITE_DONE { break }
            guard status == SQLITE_ROW else { throw error(status, sql: sql) }
            var values: [DatabaseValue] = []
            values.reserveCapacity(Int(columns))
            for column in 0..<columns { values.append(value(statement, column)) }
            rows.append(Row(values, columns: names))
        }
        return rows
    }

    // MARK: - Statements

    /// The statement's column names: the `AS` alias, else the column's own name.
    private func names(of statement: OpaquePointer, count: Int32) -> ColumnNames {
        if let cached = columnNames[statement] { return cached }
        let names = ColumnNames((0..<count).map { column in
            sqlite3_column_name(statement, column).map { String(cString: $0) } ?? "column\(column)"
        })
        columnNames[statement] = names
        return names
    }

    private func prepare(_ sql: SQL) throws -> OpaquePointer {
        let (text, bindings) = sql.rendered { _ in "?" }
        let statement: OpaquePointer
        if let cached = statements[text] {
            statement = cached
            sqlite3_clear_bindings(statement)
        } else {
            var prepared: OpaquePointer?
            let status = sqlite3_prepare_v3(handle, text, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &prepared, nil)
            guard status == SQLITE_OK, let prepared else { throw error(status, sql: sql) }
            if statements.count >= Self.maxCachedStatements {
                for old in statements.values { sqlite3_finalize(old) }
                statements.removeAll(keepingCapacity: true)
                columnNames.removeAll(keepingCapacity: true)
            }
            statements[text] = prepared
            statement = prepared
        }
        for (offset, value) in bindings.enumerated() {
            let index = Int32(offset + 1)
            let status: Int32
            switch value {
            case .null: status = sqlite3_bind_null(statement, index)
            case .integer(let number): status = sqlite3_bind_int64(statement, index, number)
            case .real(let number): status = sqlite3_bind_double(statement, index, number)
            case .text(let string):
                status = string.utf8.withContiguousStorageIfAvailable { buffer in
                    sqlite3_bind_text(statement, index, buffer.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) },
                                      Int32(buffer.count), Self.transient)
                } ?? sqlite3_bind_text(statement, index, string, -1, Self.transient)
            case .blob(let bytes):
                status = bytes.withUnsafeBytes { buffer in
                    // A zero-length blob still needs a non-NULL pointer, or SQLite stores NULL.
                    sqlite3_bind_blob(statement, index, buffer.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(buffer.count), Self.transient)
                }
            }
            guard status == SQLITE_OK else { throw error(status, sql: sql) }
        }
        return statement
    }

    private func value(_ statement: OpaquePointer, _ column: Int32) -> DatabaseValue {
        switch sqlite3_column_type(statement, column) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(statement, column))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(statement, column))
        case SQLITE_TEXT:
            guard let text = sqlite3_column_text(statement, column) else { return .text("") }
            let count = Int(sqlite3_column_bytes(statement, column))
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self))
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(statement, column))
            guard count > 0, let bytes = sqlite3_column_blob(statement, column) else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: bytes, count: count)))
        default: return .null
        }
    }

    private func error(_ status: Int32, sql: SQL) -> StoreError {
        error(status, detail: "\(String(cString: sqlite3_errmsg(handle))) (in: \(sql.description.prefix(120)))")
    }

    private func error(_ status: Int32, detail: String) -> StoreError {
        switch status & 0xff {
        // The busy timeout ran out, or a shared-cache lock: another connection holds the
        // database for now, and the same transaction may well succeed in a moment.
        case SQLITE_BUSY, SQLITE_LOCKED: .retryable(detail)
        case SQLITE_FULL: .full(detail)
        // A write or sync the kernel refused for want of space (ENOSPC, EDQUOT).
        case SQLITE_IOERR where [ENOSPC, EDQUOT].contains(sqlite3_system_errno(handle)): .full(detail)
        case SQLITE_CONSTRAINT: .statement(message: detail, constraint: true)
        default: .statement(message: detail, constraint: false)
        }
    }
}
