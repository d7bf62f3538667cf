package import ParleyWire

// Who may do what in a conversation, decided in one place (docs/access.md). Every path that
// names a conversation, a message in it or an attachment shown in it — REST, the realtime
// socket, media downloads and signed URLs, listings, exports, the server API — finds the
// caller's ``Standing`` once (``Chat/access(_:caller:id:for:now:)``) and asks ``AccessRules``
// about each ``ConversationAction`` it performs; none decides on its own. Feeds, replays,
// pushes and webhooks follow membership, which a ban removes (decision 0010).

/// Who the caller is in one conversation, read from stored facts: their membership and role,
/// a ban in force, or the app's backend.
package enum Standing: String, CaseIterable, Sendable {
    /// The app's backend, through the server API: it manages any conversation of its app.
    case app
    /// A member with the owner role (the creator, and whoever an owner promoted).
    case owner
    /// A member with the admin role.
    case admin
    /// A plain member.
    case member
    /// Someone of the same app who is not a member: never one, left, or removed.
    case outsider
    /// Someone banned from the conversation, the ban still in force (a ban removes the member).
    case banned

    /// The standing of a caller with `role` (nil: not a member), whose ban (if any) ends at
    /// `bannedUntil` (milliseconds; nil with `isBanned`: until lifted).
    package init(role: MemberRole?, asApp: Bool, isBanned: Bool) {
        if asApp {
            self = .app
        } else if let role {
            self = switch role {
            case .owner: .owner
            case .admin: .admin
            case .member: .member
            }
        } else {
            self = isBanned ? .banned : .outsider
        }
    }

    /// Moderators: owners, admins and the app's backend.
    var moderates: Bool { self == .app || self == .owner || self == .admin }
    /// Members of the conversation (the app's backend acts as one).
    var isMember: Bool { self != .outsider && self != .banned }
}

/// Something a caller does with a conversation or what is in it. One action may serve many
/// operations (`read` serves history, events, pins, threads, reactions, members, receipts and
/// attachment downloads); docs/access.md lists which.
package enum ConversationAction: String, CaseIterable, Sendable {
    /// Know that it exists: the conversation itself, its entry in a listing or the channel directory.
    case see
    /// Read what is in it: messages (and so the last message), events, threads, pins, reactions,
    /// members, receipts, search within it, and download the attachments its messages show.
    case read
    /// Join it (a public channel; a no-op for a member).
    case join
    /// Post a message or a reply.
    case post
    /// Add and remove one's own reactions, and vote in polls.
    case react
    /// Report a message to the moderators.
    case report
    /// Keep one's own state in it: read and delivered marks, thread read marks, typing, one's
    /// mute and notification level.
    case keepOwnState
    /// Pin and unpin messages.
    case pin
    /// Edit one's own message.
    case editOwnMessage
    /// Edit someone else's message.
    case editOthersMessage
    /// Delete one's own message.
    case deleteOwnMessage
    /// Delete someone else's message.
    case deleteOthersMessage
    /// See who has one's own message (its receipts).
    case seeWhoHasOwnMessage
    /// See who has someone else's message.
    case seeWhoHasOthersMessage
    /// Leave it.
    case leave
    /// Add members.
    case addMembers
    /// Remove other members (only those one outranks: ``AccessRules/outranks(_:_:)``).
    case removeMembers
    /// Change members' roles.
    case changeRoles
    /// Ban and unban, mute and unmute members, and work through reports.
    case moderate
    /// Change the title.
    case changeTitle
    /// Change the custom data.
    case changeCustomData
    /// Change slow mode.
    case changeSlowMode
    /// Change the retention policy.
    case changeRetention
    /// Change the photo.
    case changePhoto
    /// Export everything in it.
    case export
}

/// The answer to "may this caller do this here?": one of a few outcomes, each a documented
/// refusal (docs/access.md).
package enum AccessVerdict: Hashable, Sendable {
    /// Allowed.
    case allow
    /// 404 `conversation_not_found`: the caller may not know it exists.
    case notFound
    /// 403 `not_member`: a public channel the caller has not joined.
    case notMember
    /// 403 `user_banned`.
    case banned
    /// 403 `forbidden`, with the reason.
    case forbidden(String)
    /// 400 `invalid_request`: the conversation has no such thing (a direct chat's title).
    case invalid(String)

    /// The refusal as the caller is told it; nil when allowed. `bannedUntil` (milliseconds)
    /// says until when a ban holds.
    package func error(bannedUntil: Int64? = nil) -> ChatError? {
        switch self {
        case .allow: nil
        case .notFound: .conversationNotFound
        case .notMember: .notMember
        case .banned: .userBanned(until: bannedUntil.flatMap { $0 >= Chat.forever ? nil : WireCoding.formatMilliseconds($0) })
        case .forbidden(let reason): .forbidden(reason)
        case .invalid(let reason): .invalid(reason)
        }
    }

    /// How docs/access.md writes it.
    package var documented: String {
        switch self {
        case .allow: "✓"
        case .notFound: "404"
        case .notMember: "403 not_member"
        case .banned: "403 user_banned"
        case .forbidden: "403 forbidden"
        case .invalid: "400 invalid_request"
        }
    }
}

/// The rules: for each action, conversation kind and standing, allowed or which refusal.
package enum AccessRules {
    /// May a caller of `standing` do `action` in a conversation of `kind`?
    package static func decide(_ action: ConversationAction, in kind: ConversationKind, as standing: Standing) -> AccessVerdict {
        // Outside a public channel, a non-member may not learn that a conversation exists:
        // every answer is the 404 of an id that does not exist.
        if !standing.isMember, kind != .public { return .notFound }
        switch standing {
        case .banned:
            return .banned
        case .outsider:
            return [.see, .read, .join].contains(action) ? .allow : .notMember
        case .app, .owner, .admin, .member:
            return decideForMember(action, in: kind, as: standing)
        }
    }

    /// Owners act on anyone, admins on plain members; the app's backend on anyone.
    package static func outranks(_ standing: Standing, _ target: MemberRole) -> Bool {
        switch standing {
        case .app, .owner: true
        case .admin: target == .member
        case .member, .outsider, .banned: false
        }
    }

    private static let noAdmins = "a direct conversation has no admins; create a group to manage members"
    private static let onlyModerators = "only the conversation's owners and admins may do this"

    private static func decideForMember(_ action: ConversationAction, in kind: ConversationKind, as standing: Standing) -> AccessVerdict {
        let direct = kind == .direct
        let moderator = standing.moderates && !direct || standing == .app
        switch action {
        case .see, .read, .join, .post, .react, .report, .keepOwnState, .editOwnMessage, .deleteOwnMessage, .seeWhoHasOwnMessage:
            return .allow
        case .pin:
            return kind != .public || standing.moderates ? .allow : .forbidden("in a public channel only owners and admins pin messages")
        case .editOthersMessage:
            return standing == .app ? .allow : .forbidden("only the author edits a message")
        case .deleteOthersMessage:
            return moderator ? .allow : .forbidden("only the author or a moderator deletes a message; nothing was deleted")
        case .seeWhoHasOthersMessage:
            return .forbidden("only the author sees who has a message")
        case .leave:
            return direct ? .forbidden("nobody leaves a direct conversation; archive it in the client instead") : .allow
        case .addMembers:
            if direct { return .forbidden(noAdmins) }
            return standing.moderates ? .allow : .forbidden(onlyModerators)
        case .removeMembers:
            if direct { return .forbidden("nobody leaves a direct conversation; archive it in the client instead") }
            return standing.moderates ? .allow : .forbidden("only owners, or admins removing plain members, may remove someone")
        case .changeRoles:
            if direct { return .forbidden(noAdmins) }
            return standing == .owner || standing == .app ? .allow : .forbidden("only owners change roles")
        case .moderate:
            if direct { return .forbidden("a direct conversation has no moderators; block the person instead") }
            return standing.moderates ? .allow : .forbidden("only the conversation's owners and admins moderate it")
        case .changeTitle:
            if direct { return .invalid("a direct conversation has no title") }
            return standing.moderates ? .allow : .forbidden(onlyModerators)
        case .changeCustomData:
            return direct || standing.moderates ? .allow : .forbidden(onlyModerators)
        case .changeSlowMode:
            if direct { return .invalid("a direct conversation has no slow mode") }
            return standing.moderates ? .allow : .forbidden(onlyModerators)
        case .changeRetention:
            // A direct chat keeps the app's policy: only the app's backend, which sets that
            // policy, may give one its own.
            if direct, standing != .app { return .invalid("a direct conversation keeps the app's retention policy") }
            return standing.moderates ? .allow : .forbidden(onlyModerators)
        case .changePhoto:
            if direct { return .forbidden(noAdmins) }
            return standing.moderates ? .allow : .forbidden(onlyModerators)
        case .export:
            // Both people of a direct chat own it; elsewhere its owners do.
            return direct || standing == .owner || standing == .app
                ? .allow : .forbidden("only the conversation's owners (or the app's backend) export it")
        }
    }

    // MARK: - The documented table

    /// The rules as the Markdown table in docs/access.md (a test compares the two): one row per
    /// action and group of kinds whose members are answered alike, one column per standing.
    /// Outsiders and the banned only ever reach a public channel (anywhere else they get 404,
    /// as the page says), so their columns show the public channel's answer; "—" marks what
    /// cannot happen (an admin of a direct chat).
    package static func markdownTable() -> String {
        let kinds: [ConversationKind] = [.direct, .group, .private, .public]
        let members: [Standing] = [.app, .owner, .admin, .member]
        func cell(_ action: ConversationAction, _ kind: ConversationKind, _ standing: Standing) -> String {
            kind == .direct && standing == .admin ? "—" : decide(action, in: kind, as: standing).documented
        }
        var lines = ["| action | kinds | app | owner | admin | member | outsider | banned |", "|---|---|---|---|---|---|---|---|"]
        for action in ConversationAction.allCases {
            var groups: [(kinds: [ConversationKind], cells: [String])] = []
            for kind in kinds {
                let cells = members.map { cell(action, kind, $0) }
                if let index = groups.firstIndex(where: { $0.cells == cells }) {
                    groups[index].kinds.append(kind)
                } else {
                    groups.append(([kind], cells))
                }
            }
            for group in groups {
                let kindNames = group.kinds.count == kinds.count ? "all" : group.kinds.map(\.rawValue).joined(separator: ", ")
                let outside = group.kinds.contains(.public) ? [.outsider, .banned].map { cell(action, .public, $0) } : ["—", "—"]
                lines.append("| \(action.rawValue) | \(kindNames) | " + (group.cells + outside).joined(separator: " | ") + " |")
            }
        }
        return lines.joined(separator: "\n")
    }
}
