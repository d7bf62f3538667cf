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
///
/// PostgreSQL: a `tsvector` per message in `message_search`, GIN-indexed. The vector is made
/// from the same words the SQLite tokenizer finds (``Chat/searchWords(_:)``), lower-cased and
/// without diacritics (what `remove_diacritics 2` does), under the `simple` configuration (no
/// stemming, as on SQLite): both engines find the same messages for the same query.
enum FullTextSearch {
    /// Indexes a new message's text (or an edit's new text).
    static func index(_ db: any Database, message key: Int64, text: String) throws {
        guard !text.isEmpty else { return }
        switch db.dialect {
        case .sqlite: try db.enqueue("INSERT INTO message_fts (rowid, body) VALUES (\(key), \(text))")
        case .postgres:
            guard let words = postgresWords(text) else { return }
            try db.enqueue("""
                INSERT INTO message_search (message_id, body) VALUES (\(key), to_tsvector('simple', \(words)))
                ON CONFLICT (message_id) DO UPDATE SET body = excluded.body
                """)
        }
    }

    /// PostgreSQL: the words of `text` the index keeps, as `to_tsvector`'s argument; nil when
    /// there are none (nothing to index).
    static func postgresWords(_ text: String) -> String? {
        guard !text.isEmpty else { return nil }
        let words = folded(Chat.searchWords(text))
        return words.isEmpty ? nil : words.joined(separator: " ")
    }

    /// PostgreSQL: a new message's entry as a common table expression of the statement that
    /// inserts it (`inserted`, answering its `id`), so a send does not run it on its own; nil
    /// when there is nothing to index.
    static func postgresInsertingEntry(text: String) -> SQL? {
        postgresWords(text).map { "searched AS (INSERT INTO message_search (message_id, body) SELECT id, to_tsvector('simple', \($0)) FROM inserted)" }
    }

    /// Removes a message's old text from the index (an edit, a delete).
    static func unindex(_ db: any Database, message key: Int64, text: String) throws {
        guard !text.isEmpty else { return }
        switch db.dialect {
        case .sqlite: try db.execute("INSERT INTO message_fts (message_fts, rowid, body) VALUES ('delete', \(key), \(text))")
        case .postgres: try db.execute("DELETE FROM message_search WHERE message_id = \(key)")
        }
    }

    /// The messages matching every word, best first: the query's `FROM … WHERE … ORDER BY`
    /// around `scope` (joins that limit which messages may be found), reading
    /// ``Chat/messageColumns``.
    ///
    /// Words are runs of letters, digits and marks (what the tokenizer indexes; ``Chat/searchWords(_:)``).
    /// On SQLite each becomes a quoted FTS5 phrase, so no user text is FTS syntax, and the
    /// last is a prefix: `"hel"*` finds "hello" while typing.
    static func matches(_ db: any Database, words: [String], scope: SQL, limit: Int, offset: Int = 0) throws -> [Row] {
        switch db.dialect {
        case .sqlite:
            let match = words.enumerated().map { index, word in
                "\"" + word.replacingOccurrences(of: "\"", with: "\"\"") + "\"" + (index == words.count - 1 ? "*" : "")
            }.joined(separator: " ")
            return try db.fetchAll("""
                SELECT \(Chat.messageColumns) FROM message_fts f JOIN message m ON m.id = f.rowid
                JOIN account u ON u.id = m.author_id JOIN conversation c ON c.id = m.conversation_id \(scope)
                WHERE message_fts MATCH \(match) AND m.deleted_at IS NULL ORDER BY f.rank LIMIT \(limit) OFFSET \(offset)
                """)
        case .postgres:
            // Words hold only letters, digits and marks, so quoting each makes it one lexeme
            // and no user text is tsquery syntax; the last matches as a prefix.
            let lexemes = folded(words)
            guard !lexemes.isEmpty else { return [] }
            let terms = lexemes.enumerated().map { index, word in
                "'" + word + "'" + (index == lexemes.count - 1 ? ":*" : "")
            }.joined(separator: " & ")
            return try db.fetchAll("""
                SELECT \(Chat.messageColumns) FROM message_search f JOIN message m ON m.id = f.message_id
                JOIN account u ON u.id = m.author_id JOIN conversation c ON c.id = m.conversation_id \(scope)
                WHERE f.body @@ to_tsquery('simple', \(terms)) AND m.deleted_at IS NULL
                ORDER BY ts_rank(f.body, to_tsquery('simple', \(terms))) DESC, m.id DESC LIMIT \(limit) OFFSET \(offset)
                """)
        }
    }

    /// Words as the index keeps them: lower case, without diacritics.
    private static func folded(_ words: [String]) -> [String] {
        words.compactMap(fold)
    }

    /// One word as the index keeps it: lower case, without diacritics; nil when nothing is
    /// left or it holds a quote or a backslash (which `to_tsquery` would read as syntax).
    ///
    /// A word of ASCII letters and digits (most words) is its own ASCII lower case, which is
    /// what Foundation's folding gives it. That folding, bridged through `NSString`, cost a
    /// tenth of the PostgreSQL writer thread's time per send; it is kept for the other words.
    static func fold(_ word: String) -> String? {
        var lowered: [UInt8] = []
        lowered.reserveCapacity(word.utf8.count)
        for byte in word.utf8 {
            guard byte < 0x80 else { return foldWithFoundation(word) }
            lowered.append(byte >= 0x41 && byte <= 0x5A ? byte + 0x20 : byte)
        }
        guard !lowered.isEmpty, !lowered.contains(0x27), !lowered.contains(0x5C) else { return nil }
        return String(decoding: lowered, as: UTF8.self)
    }

    /// ``fold(_:)`` for a word with characters beyond ASCII.
    static func foldWithFoundation(_ word: String) -> String? {
        let folded = word.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil).lowercased()
        guard !folded.isEmpty, !folded.unicodeScalars.contains(where: { $0 == "'" || $0 == "\\" }) else { return nil }
        return folded
    }
}
