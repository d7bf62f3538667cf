import Foundation
import ParleyStore
import ParleyStoreSQLite
import ParleySync
import Testing

/// A fresh database file in its own directory.
private func makeStore(_ configuration: SQLiteStore.Configuration = SQLiteStore.Configuration()) throws -> (SQLiteStore, String) {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-store-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let path = directory + "/test.sqlite"
    return (try SQLiteStore(path: path, configuration: configuration), path)
}

private struct Planned: Error {}

struct SQLiteStoreTests {
    @Test func interpolatedValuesAreBoundNeverSpliced() async throws {
        let (store, _) = try makeStore()
        defer { store.close() }
        let hostile = "x'); DROP TABLE note; --"
        let sql: SQL = "INSERT INTO note (body) VALUES (\(hostile))"
        #expect(sql.description == "INSERT INTO note (body) VALUES (?)")
        try await store.write { db in
            try db.execute("CREATE TABLE note (id INTEGER PRIMARY KEY, body TEXT, data BLOB, score REAL)")
            try db.execute(sql)
            try db.execute("INSERT INTO note (body, data, score) VALUES (\(nil as String?), \([UInt8]()), \(2.5))")
        }
        let rows = try await store.read { db in try db.fetchAll("SELECT body, data, score FROM note ORDER BY id") }
        #expect(try rows[0].get(at: 0, as: String.self) == hostile)
        #expect(try rows[1].get(at: 0, as: String?.self) == nil)
        #expect(try rows[1].get(at: 1, as: [UInt8].self) == [])
        #expect(try rows[1].get(at: 2, as: Double.self) == 2.5)
        #expect(throws: StoreError.self) { try rows[0].get(at: 0, as: Int64.self) }
        let list = try await store.read { db in
            try db.fetchAll("SELECT body FROM note WHERE id IN (\(list: [1, 2, 3]))").count
        }
        #expect(list == 2)
    }

    @Test func concurrentWritesShareCommitsAndEachIsAtomic() async throws {
        let (store, _) = try makeStore()
        defer { store.close() }
        try await store.write { db in try db.execute("CREATE TABLE item (id INTEGER PRIMARY KEY, owner INTEGER NOT NULL, n INTEGER NOT NULL)") }
        let before = store.commitStatistics
        // 400 writers at once; every 7th inserts a row and then fails, so its row must vanish
        // while the rows of the writers batched with it stay.
        let outcomes = await withTaskGroup(of: Bool.self) { group in
            for writer in 0..<400 {
                group.addTask {
                    do {
                        try await store.write { db in
                            try db.execute("INSERT INTO item (owner, n) VALUES (\(writer), 1)")
                            try db.execute("INSERT INTO item (owner, n) VALUES (\(writer), 2)")
                            if writer % 7 == 0 { throw Planned() }
                        }
                        return true
                    } catch {
                        return false
                    }
                }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 }.count == 400 - 58)
        let rows = try await store.read { db in
            try db.fetchAll("SELECT owner, count(*) FROM item GROUP BY owner").map { (try $0.get(at: 0, as: Int.self), try $0.get(at: 1, as: Int.self)) }
        }
        #expect(rows.count == 400 - 58)
        #expect(rows.allSatisfy { $0.0 % 7 != 0 && $0.1 == 2 })
        let after = store.commitStatistics
        #expect(after.writes - before.writes == 400)
        #expect(after.transactions - before.transactions < 400, "writes queued together commit together")
    }

    /// A write that may ride commits in the transaction of the next write begun for something
    /// else (no transaction of its own), and alone once its wait is over if none comes.
    @Test func aRidingWriteCommitsWithTheNextWriteOrAloneWhenItsWaitIsOver() async throws {
        let (store, _) = try makeStore()
        defer { store.close() }
        try await store.write { db in try db.execute("CREATE TABLE item (name TEXT NOT NULL)") }
        // Alone: nothing else is written, so it goes when its 20 ms are over, in a transaction of its own.
        var before = store.commitStatistics
        try await store.write(shard: nil, ridingWithin: .milliseconds(20), { db in try db.execute("INSERT INTO item VALUES ('alone')") }, afterCommit: { _ in })
        var after = store.commitStatistics
        #expect(after.writes - before.writes == 1 && after.transactions - before.transactions == 1)
        // Riding: it may wait a minute, but goes with the next plain write, adding no transaction.
        before = store.commitStatistics
        let started = ContinuousClock.now
        let rode = LockedValue(false)
        let rider = Task {
            try await store.write(shard: nil, ridingWithin: .seconds(60), { db in try db.execute("INSERT INTO item VALUES ('rider')") },
                                  afterCommit: { _ in rode.set(true) })
        }
        var plain = 0
        while !rode.get(), plain < 1_000 {
            plain += 1
            try await store.write { db in try db.execute("INSERT INTO item VALUES ('plain')") }
        }
        _ = try await rider.value
        after = store.commitStatistics
        #expect(ContinuousClock.now - started < .seconds(30), "it did not wait out its minute")
        #expect(after.writes - before.writes == plain + 1)
        #expect(after.transactions - before.transactions == plain, "the rider shared a plain write's transaction")
        #expect(try await store.read { db in try db.fetchValue(Int.self, "SELECT count(*) FROM item WHERE name = 'rider'") } == 1)
    }

    @Test func aConstraintViolationIsTypedAndRollsBackOnlyItsWrite() async throws {
        let (store, _) = try makeStore()
        defer { store.close() }
        try await store.write { db in try db.execute("CREATE TABLE u (name TEXT PRIMARY KEY)") }
        try await store.write { db in try db.execute("INSERT INTO u VALUES ('ana')") }
        await #expect {
            try await store.write { db in
                try db.execute("INSERT INTO u VALUES ('bob')")
                try db.execute("INSERT INTO u VALUES ('ana')")
            }
        } throws: { error in
            (error as? StoreError)?.isConstraintViolation == true
        }
        let names = try await store.read { db in try db.fetchAll("SELECT name FROM u").map { try $0.get(at: 0, as: String.self) } }
        #expect(names == ["ana"])
    }

    @Test func anAcknowledgedWriteIsInTheFileForAnotherConnection() async throws {
        let (store, path) = try makeStore()
        try await store.write { db in try db.execute("CREATE TABLE t (v TEXT)") }
        try await store.write { db in try db.execute("INSERT INTO t VALUES ('durable')") }
        // A second engine on the same file (as a restarted server would be) sees it at once.
        let other = try SQLiteStore(path: path)
        defer { other.close() }
        let value = try await other.read { db in try db.fetchValue(String.self, "SELECT v FROM t") }
        #expect(value == "durable")
        store.close()
        await #expect(throws: StoreError.closed) { try await store.read { _ in 1 } }
    }

    @Test func migrationsRunOnceInOrderAndANewerDatabaseIsRefused() async throws {
        let (store, _) = try makeStore()
        defer { store.close() }
        var migrator = Migrator()
        migrator.register("001 a") { db in try db.execute("CREATE TABLE a (x INTEGER)") }
        migrator.register("002 b") { db in try db.execute("CREATE TABLE b (x INTEGER REFERENCES a(x))") }
        #expect(try await migrator.migrate(store) == ["001 a", "002 b"])
        #expect(try await migrator.migrate(store) == [])
        var older = Migrator()
        older.register("001 a") { db in try db.execute("CREATE TABLE a (x INTEGER)") }
        await #expect(throws: StoreError.unknownMigrations(["002 b"])) { try await older.migrate(store) }
        var failing = migrator
        failing.register("003 broken") { db in
            try db.execute("CREATE TABLE c (x INTEGER)")
            try db.execute("THIS IS NOT SQL")
        }
        await #expect(throws: StoreError.self) { try await failing.migrate(store) }
        let tables = try await store.read { db in
            try db.fetchAll("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'c'").count
        }
        #expect(tables == 0, "a failed migration leaves nothing behind")
    }

    @Test func readersRunWhileAWriteIsOpen() async throws {
        let (store, _) = try makeStore()
        defer { store.close() }
        try await store.write { db in
            try db.execute("CREATE TABLE t (v INTEGER)")
            try db.execute("INSERT INTO t VALUES (1)")
        }
        let counts = try await withThrowingTaskGroup(of: Int?.self) { group in
            for _ in 0..<50 { group.addTask { try await store.read { db in try db.fetchValue(Int.self, "SELECT count(*) FROM t") } } }
            group.addTask { try await store.write { db in try db.execute("INSERT INTO t VALUES (2)") }; return nil }
            return try await group.reduce(into: [Int]()) { if let count = $1 { $0.append(count) } }
        }
        // Every read saw a whole snapshot: before the insert or after it, never anything else.
        #expect(counts.count == 50 && counts.allSatisfy { $0 == 1 || $0 == 2 })
        #expect(try await store.read { db in try db.fetchValue(Int.self, "SELECT count(*) FROM t") } == 2)
    }

    @Test func aFileThatIsNotADatabaseIsRefusedWithAClearError() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-bad-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = directory + "/not.sqlite"
        try Data(repeating: 0x41, count: 4096).write(to: URL(fileURLWithPath: path))
        #expect(throws: StoreError.self) { try SQLiteStore(path: path) }
    }
}
