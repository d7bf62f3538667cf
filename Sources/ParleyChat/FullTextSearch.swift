import Foundation
import ParleyStore
import ParleyWire

/// Full-text search over message text, one implementation per SQL dialect. The domain calls
/// these three functions and never writes index SQL itself, so the PostgreSQL engine adds its
/// own (a `tsvector` column with a GIN index, kept by the same calls) without touching a send.
///
/// SQLite: a contentless FTS5 table (`message_fts`, migration 0003, `unicode61` tokenizer):
/// the text lives in `message` once and the index holds only tokens, so removing an entry
/// needs its old text, which every caller has at hand.
enum FullTextSearch {
    /// Indexes a new message's text (or an edit's new text).
    static func index(_ db: any Database, message key: Int64, text: String) throws {
        guard !text.isEmpty else { return }
        switch db.dialect {
        case .sqlite: try db.execute("INSERT INTO message_fts (rowid, body) VALUES (\(key), \(text))")
        case .postgres: throw unsupported
        }
    }

    /// Removes a message's old text from the index (an edit, a delete).
    static func unindex(_ db: any Database, message key: Int64, text: String) throws {
        guard !text.isEmpty else { return }
        switch db.dialect {
        case .sqlite: try db.execute("INSERT INTO message_fts (message_fts, rowid, body) VALUES ('delete', \(key), \(text))")
        case .postgres: throw unsupported
        }
    }

    /// The messages matching every word, best first: the query's `FROM … WHERE … ORDER BY`
    /// around `scope` (joins that limit which messages may be found), reading
    /// ``Chat/messageColumns``.
    ///
    /// Words are runs of letters, digits and marks (what the tokenizer indexes; ``Chat/searchWords(_:)``).
    /// On SQLite each becomes a quoted FTS5 phrase, so no user text is FTS syntax, and the
    /// last is a prefix: `"hel"*` finds "hello" while typing.
    static func matches(_ db: any Database, words: [String], scope: SQL, limit: Int) throws -> [Row] {
        switch db.dialect {
        case .sqlite:
            let match = words.enumerated().map { index, word in
                "\"" + word.replacingOccurrences(of: "\"", with: "\"\"") + "\"" + (index == words.count - 1 ? "*" : "")
            }.joined(separator: " ")
            return try db.fetchAll("""
                SELECT \(Chat.messageColumns) FROM message_fts f JOIN message m ON m.id = f.rowid
                JOIN account u ON u.id = m.author_id JOIN conversation c ON c.id = m.conversation_id \(scope)
                WHERE message_fts MATCH \(match) AND m.deleted_at IS NULL ORDER BY f.rank LIMIT \(limit)
                """)
        case .postgres:
            throw unsupported
        }
    }

    private static let unsupported = StoreError.statement(
        message: "full-text search on PostgreSQL comes with the PostgreSQL engine (tsvector + GIN)", constraint: false)
}
