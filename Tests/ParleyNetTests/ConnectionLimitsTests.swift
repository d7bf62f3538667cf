#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import ParleyNet

/// Issue 31, item 2: the places a server gives connections, in all and per address.
struct ConnectionLimitsTests {
    private func v4(_ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32, port: UInt16 = 40000) -> SocketAddress {
        SocketAddress(storage: .v4(host: a << 24 | b << 16 | c << 8 | d, port: port))
    }

    private func v6(_ bytes: [UInt8]) -> SocketAddress {
        SocketAddress(storage: .v6(host: bytes, port: 40000, scope: 0))
    }

    @Test func oneAddressGetsItsShareAndItsPlacesComeBackWhenItsConnectionsClose() throws {
        var limits = ConnectionLimits()
        limits.total = 10
        limits.perAddress = 2
        let gate = ConnectionGate(limits)
        let flooder = v4(203, 0, 113, 7)
        let first = try gate.admit(flooder).get()
        _ = try gate.admit(v4(203, 0, 113, 7, port: 40001)).get()
        #expect(throws: ConnectionGate.Refusal.address) { try gate.admit(flooder).get() }
        // Someone else is still let in.
        _ = try gate.admit(v4(198, 51, 100, 1)).get()
        first()
        first()   // a second release of the same place changes nothing
        _ = try gate.admit(flooder).get()
        #expect(throws: ConnectionGate.Refusal.address) { try gate.admit(flooder).get() }
    }

    @Test func theTotalHoldsWhateverTheAddresses() throws {
        var limits = ConnectionLimits()
        limits.total = 3
        let gate = ConnectionGate(limits)
        var held: [ConnectionGate.Release] = []
        for host in 1...3 { held.append(try gate.admit(v4(198, 51, 100, UInt32(host))).get()) }
        #expect(throws: ConnectionGate.Refusal.total) { try gate.admit(v4(198, 51, 100, 9)).get() }
        held[0]()
        _ = try gate.admit(v4(198, 51, 100, 9)).get()
    }

    /// A total past what the descriptor limit allows is lowered to it: a full descriptor table
    /// brings the process down (libdispatch aborts it), so client connections never fill it.
    @Test func aTotalPastTheDescriptorLimitIsLoweredToWhatItAllows() throws {
        var limits = ConnectionLimits()
        let ceiling = ConnectionLimits.descriptorCeiling
        #expect(limits.effectiveTotal == ceiling)
        limits.total = ceiling + 100_000
        #expect(limits.effectiveTotal == ceiling)
        limits.total = 3
        #expect(limits.effectiveTotal == 3)
        var descriptors = rlimit()
        #expect(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &descriptors) == 0)
        if descriptors.rlim_cur < 1 << 40 {
            #expect(ceiling < Int(descriptors.rlim_cur) || ceiling == 64)
        }
    }

    @Test func aProxyInFrontIsNotAFloodUnlessTheOperatorSaysSo() throws {
        var limits = ConnectionLimits()
        limits.total = 100
        limits.perAddress = 1
        let gate = ConnectionGate(limits)
        for _ in 0..<5 {
            _ = try gate.admit(v4(127, 0, 0, 1)).get()
            _ = try gate.admit(v4(10, 1, 2, 3)).get()
            _ = try gate.admit(v4(192, 168, 0, 2)).get()
            _ = try gate.admit(v6([0xfd] + [UInt8](repeating: 0, count: 14) + [1])).get()
        }
        limits.perAddressCoversPrivate = true
        let strict = ConnectionGate(limits)
        _ = try strict.admit(v4(127, 0, 0, 1)).get()
        #expect(throws: ConnectionGate.Refusal.address) { try strict.admit(v4(127, 0, 0, 1)).get() }
    }

    @Test func anIPv6ClientIsCountedByItsSlash64AndAMappedIPv4AsItsIPv4() throws {
        var limits = ConnectionLimits()
        limits.total = 100
        limits.perAddress = 1
        let gate = ConnectionGate(limits)
        let prefix: [UInt8] = [0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2]
        _ = try gate.admit(v6(prefix + [0, 0, 0, 0, 0, 0, 0, 1])).get()
        #expect(throws: ConnectionGate.Refusal.address) { try gate.admit(v6(prefix + [9, 9, 9, 9, 9, 9, 9, 9])).get() }
        _ = try gate.admit(v4(203, 0, 113, 8)).get()
        let mapped = [UInt8](repeating: 0, count: 10) + [0xff, 0xff, 203, 0, 113, 8]
        #expect(throws: ConnectionGate.Refusal.address) { try gate.admit(v6(mapped)).get() }
    }
}
