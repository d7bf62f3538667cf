import ParleyStore
import Testing

/// Which writes of a batch may have their declared reads answered ahead
/// (``WriteDeclaration/readAhead(_:)``, decision 0026 part 5).
struct WriteDeclarationTests {
    private func declared(dependsOn: Set<String>, changes: Set<String>) -> WriteDeclaration {
        WriteDeclaration(reads: ["SELECT 1"], dependsOn: dependsOn, changes: changes)
    }

    @Test func writesThatChangeNothingTheOthersDependOnAllReadAhead() {
        let sends = ["ann", "ben", "cat"].map { declared(dependsOn: [$0], changes: [$0]) }
        #expect(WriteDeclaration.readAhead(sends) == [true, true, true])
    }

    @Test func aReadNeverGoesAheadOfAChangeItDependsOnButOthersStillDo() {
        let batch = [declared(dependsOn: ["ann"], changes: ["ann"]), declared(dependsOn: ["ann"], changes: ["ann"]),
                     declared(dependsOn: ["ben"], changes: ["ben"]), declared(dependsOn: ["ann", "cat"], changes: [])]
        #expect(WriteDeclaration.readAhead(batch) == [true, false, true, false])
    }

    @Test func aWriteThatDeclaresNothingEndsReadingAheadForEveryWriteAfterIt() {
        let batch = [declared(dependsOn: ["ann"], changes: ["ann"]), nil, declared(dependsOn: ["ben"], changes: ["ben"])]
        #expect(WriteDeclaration.readAhead(batch) == [true, false, false])
        #expect(WriteDeclaration.readAhead([nil, nil]) == [false, false])
        #expect(WriteDeclaration.readAhead([]) == [])
    }
}
