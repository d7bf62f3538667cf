import Foundation
import ParleyCrypto
import ParleyStore
package import ParleyWire

extension Notifications {
    /// Registers the caller's session's device for push (`POST /v1/devices`). The same token
    /// registered again is updated, and moves to the caller if another account had it (the
    /// phone changed hands, or another user signed in on it); a session's new token for a
    /// platform replaces its old one (the token rotated).
    ///
    /// - Throws: 400 for a token of the wrong shape, or an environment given for FCM; 409
    ///   `too_many_devices` past ``Limits/pushDevicesPerUser``.
    package func register(_ caller: Caller, _ request: RegisterDeviceRequest) async throws -> PushDevice {
        let token = try Validate.pushToken(request.platform, request.token)
        if request.platform == .fcm, request.environment != nil {
            throw ChatError.invalid("environment is for APNs tokens; leave it out for fcm")
        }
        let environment = request.environment ?? .production
        let now = nowMilliseconds
        let publicID = Crypto.randomID(prefix: "d_", length: 20)
        return try await run {
            try await store.write { db in
                let platform = request.platform.rawValue
                // The session's earlier token for this platform is replaced by this one.
                try db.execute("""
                    DELETE FROM push_device WHERE session_id = \(caller.sessionKey) AND platform = \(platform) AND token != \(token)
                    """)
                if let row = try db.fetchOne("SELECT id, public_id FROM push_device WHERE app_id = \(caller.appID) AND platform = \(platform) AND token = \(token)") {
                    try db.execute("""
                        UPDATE push_device SET user_id = \(caller.userKey), session_id = \(caller.sessionKey), environment = \(environment.rawValue),
                               updated_at = \(now)
                        WHERE id = \(try row.get("id", as: Int64.self))
                        """)
                    return try Chat.fetchDevice(db, publicID: try row.get("public_id"))
                }
                let count = try db.fetchValue(Int64.self, "SELECT count(*) FROM push_device WHERE user_id = \(caller.userKey)") ?? 0
                guard count < Limits.pushDevicesPerUser else { throw ChatError.tooManyDevices(limit: Limits.pushDevicesPerUser) }
                try db.execute("""
                    INSERT INTO push_device (public_id, app_id, user_id, session_id, platform, token, environment, created_at, updated_at)
                    VALUES (\(publicID), \(caller.appID), \(caller.userKey), \(caller.sessionKey), \(platform), \(token), \(environment.rawValue),
                            \(now), \(now))
                    """)
                return try Chat.fetchDevice(db, publicID: publicID)
            }
        }
    }

    /// The caller's devices registered for push, newest first (`GET /v1/devices`).
    package func devices(_ caller: Caller) async throws -> PushDeviceList {
        try await run {
            try await store.read { db in
                let rows = try db.fetchAll("""
                    SELECT \(Chat.deviceColumns) FROM push_device d JOIN session s ON s.id = d.session_id
                    WHERE d.user_id = \(caller.userKey) ORDER BY d.updated_at DESC, d.id DESC
                    """)
                return PushDeviceList(devices: try rows.map(Chat.device))
            }
        }
    }

    /// Removes one of the caller's devices (`DELETE /v1/devices/{id}`): it gets no more pushes.
    ///
    /// - Throws: 404 `device_not_found` when the caller has no device with that id.
    package func removeDevice(_ caller: Caller, id: String) async throws {
        try await run {
            try await store.write { db in
                guard try db.execute("DELETE FROM push_device WHERE public_id = \(id) AND user_id = \(caller.userKey)") == 1 else {
                    throw ChatError.deviceNotFound
                }
            }
        }
    }

    /// Removes every device the caller's session registered (the SDK's `unregisterForPush`).
    package func removeSessionDevices(_ caller: Caller) async throws {
        try await run {
            try await store.write { db in _ = try db.execute("DELETE FROM push_device WHERE session_id = \(caller.sessionKey)") }
        }
    }
}

extension Chat {

    static let deviceColumns: SQL = "d.public_id, d.platform, d.token, d.environment, s.public_id AS session_public_id, d.updated_at"

    static func fetchDevice(_ db: any Database, publicID: String) throws -> PushDevice {
        guard let row = try db.fetchOne("""
            SELECT \(deviceColumns) FROM push_device d JOIN session s ON s.id = d.session_id WHERE d.public_id = \(publicID)
            """) else { throw ChatError.deviceNotFound }
        return try device(row)
    }

    static func device(_ row: Row) throws -> PushDevice {
        guard let platform = PushPlatform(rawValue: try row.get("platform")),
              let environment = PushEnvironment(rawValue: try row.get("environment")) else {
            throw StoreError.decoding("push_device holds an unknown platform or environment")
        }
        return PushDevice(id: try row.get("public_id"), platform: platform, token: try row.get("token"), environment: environment,
                          sessionId: try row.get("session_public_id"), updatedAt: Chat.date(try row.get("updated_at")))
    }
}

extension Validate {
    /// An APNs token is hex (stored lowercased: the same token in either case is one device);
    /// an FCM token is `A-Z a-z 0-9 - _ :`.
    static func pushToken(_ platform: PushPlatform, _ token: String) throws -> String {
        let bytes = Array(token.utf8)
        switch platform {
        case .apns:
            guard Limits.apnsTokenHex.contains(bytes.count), bytes.count % 2 == 0,
                  bytes.allSatisfy({ (48...57).contains($0) || (65...70).contains($0) || (97...102).contains($0) }) else {
                throw ChatError.invalid("an APNs token is \(Limits.apnsTokenHex.lowerBound)–\(Limits.apnsTokenHex.upperBound) hex digits, an even number "
                    + "(the device token's bytes in hex)")
            }
            return token.lowercased()
        case .fcm:
            guard Limits.fcmTokenBytes.contains(bytes.count),
                  bytes.allSatisfy({ isASCIIAlphanumeric($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ":") }) else {
                throw ChatError.invalid("an FCM token is \(Limits.fcmTokenBytes.lowerBound)–\(Limits.fcmTokenBytes.upperBound) characters of A-Z a-z 0-9 - _ :")
            }
            return token
        }
    }
}
