import Foundation
import Parley
import ParleyTerminalUI
import ParleyWire

/// `parley chat <conversation>`: the full-screen chat. Everything that happens — a key, an
/// event, a status change, a tick — becomes one input to a single loop that updates the
/// model and redraws from ``ChatLayout``.
enum ChatScreen {
    enum Input: Sendable {
        case key(Key)
        case live(ParleyClient.LiveEvent)
        case outgoing(ParleyClient.OutgoingUpdate)
        case state(ParleyClient.ConnectionState)
        case tick
    }

    static let help = "Enter sends · /edit N text · /delete N… · /react N 👍 · /unreact N 👍 · /pin N · /unpin N · /vote N 1 · PgUp/PgDn · /quit"

    static func run(_ client: ParleyClient, conversation id: ConversationID) async throws {
        guard let me = await client.currentUser else { throw ParleyError.notSignedIn }
        let conversation = try await client.conversation(id)
        let title = conversation.title ?? conversation.peer?.displayName ?? "chat"
        var messages = try await client.history(of: id).messages
        var hasOlder = messages.count == 50
        try await client.track(id)
        // The others' watermarks, for the ticks of messages sent before this screen opened.
        var watermarks: [UserID: (delivered: Int64, read: Int64)] = [:]
        if conversation.kind != .public {
            for receipt in try await client.receipts(in: id) where receipt.userID != me.id {
                watermarks[receipt.userID] = (receipt.deliveredSeq, receipt.readSeq)
            }
        }

        let terminal = Terminal()
        let (inputs, feed) = AsyncStream<Input>.makeStream()
        let events = await client.events()
        let updates = await client.outgoingUpdates()
        let states = await client.connectionStates()
        let keys = terminal.keys()
        let feeders = [
            Task { for await key in keys { feed.yield(.key(key)) } },
            Task { for await event in events { feed.yield(.live(event)) } },
            Task { for await update in updates { feed.yield(.outgoing(update)) } },
            Task { for await state in states { feed.yield(.state(state)) } },
            Task {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(1))
                    feed.yield(.tick)
                }
            },
        ]
        terminal.enterRawMode()
        defer {
            for feeder in feeders { feeder.cancel() }
            terminal.leaveRawMode()
        }
        await client.connect()

        // The model.
        var pending: [(clientID: String, text: String, status: ChatLayout.Status)] = []
        var statuses: [MessageID: ChatLayout.Status] = [:]
        // Ticks as the server says when the chat opens.
        for message in messages where message.sender.id == me.id {
            switch message.status {
            case .read?: statuses[message.id] = .read
            case .delivered?: statuses[message.id] = .delivered
            default: break
            }
        }
        /// The ticks of the user's own messages from the others' watermarks (never moving back).
        func retick() {
            guard !watermarks.isEmpty else { return }
            let lowestDelivered = watermarks.values.map(\.delivered).min() ?? 0
            let lowestRead = watermarks.values.map(\.read).min() ?? 0
            for message in messages where message.sender.id == me.id && statuses[message.id] != .read {
                switch DeliveryStatus.of(seq: message.seq, lowestDelivered: lowestDelivered, lowestRead: lowestRead) {
                case .read: statuses[message.id] = .read
                case .delivered: statuses[message.id] = .delivered
                default: break
                }
            }
        }
        var typing: [UserID: (name: String, until: Date)] = [:]
        var names: [UserID: String] = [me.id: me.displayName]
        for message in messages { names[message.sender.id] = message.sender.displayName }
        var input = ""
        var scroll = 0
        var notice: String? = help
        var connection = "connecting"
        var peerPresence: String?
        let peer = conversation.kind == .direct ? conversation.peer?.id : nil
        var lastTypingSent = Date.distantPast
        var readUpTo: Int64 = 0
        let clock = DateFormatter()
        clock.dateFormat = "HH:mm"
        func presenceText(_ presence: Presence) -> String {
            presence.status == .online ? "online" : presence.lastSeenAt.map { "last seen \(clock.string(from: $0))" } ?? "offline"
        }

        func bubbles() -> [ChatLayout.Bubble] {
            var numbered: [ChatLayout.Bubble] = []
            for message in messages {
                let mine = message.sender.id == me.id
                numbered.append(ChatLayout.Bubble(
                    number: Int(message.seq), mine: mine, sender: message.sender.displayName, time: clock.string(from: message.sentAt),
                    text: describe(message), edited: message.editedAt != nil, deleted: message.deletedAt != nil,
                    status: mine ? (statuses[message.id] ?? .sent) : nil, reactions: reactionLine(message), pinned: message.pinnedAt != nil))
            }
            for item in pending {
                numbered.append(ChatLayout.Bubble(number: nil, mine: true, sender: me.displayName, time: clock.string(from: Date()),
                                                  text: item.text, status: item.status))
            }
            return numbered
        }

        func redraw() {
            let size = terminal.size
            let layout = ChatLayout(width: size.width, height: size.height)
            let now = Date()
            let typers = typing.values.filter { $0.until > now }.map(\.name).sorted()
            let typingLine = typers.isEmpty ? nil : typers.joined(separator: ", ") + (typers.count == 1 ? " is typing…" : " are typing…")
            // The peer's presence in a direct chat; this client's own connection only while it is not live.
            var heading = title
            if conversation.kind == .direct { heading += "  [\(peerPresence ?? "…")]" }
            if connection != "online" { heading += "  (you: \(connection))" }
            terminal.draw(layout.screen(title: heading, bubbles: bubbles(), scroll: scroll, typing: typingLine,
                                        input: input, notice: notice))
        }

        /// The message shown as `#number` (its seq; `#12` and `12` alike).
        func message(numbered number: Int) -> Message? {
            messages.first { $0.seq == Int64(number) }
        }

        /// `12` or `#12`.
        func parsedNumber(_ word: String) -> Int? { Int(word.hasPrefix("#") ? String(word.dropFirst()) : word) }

        /// Runs one line from the input: a message, or a command. Returns a notice to show.
        func perform(_ line: String) async throws -> String? {
            guard !line.isEmpty else { return nil }
            guard line.hasPrefix("/") else {
                let clientID = try await client.send(.text(line), to: id)
                pending.append((clientID, line, .sending))
                scroll = 0
                return nil
            }
            let parts = line.split(separator: " ", maxSplits: 2).map(String.init)
            switch parts[0] {
            case "/quit":
                return nil
            case "/edit":
                guard parts.count == 3, let number = parsedNumber(parts[1]), let target = message(numbered: number) else { return "usage: /edit N new text" }
                guard target.sender.id == me.id else { return "you can only edit your own messages" }
                let edited = try await client.edit(target.id, in: id, to: .text(parts[2]))
                if let index = messages.firstIndex(where: { $0.id == edited.id }) { messages[index] = edited }
                return "edited #\(number)"
            case "/react", "/unreact":
                guard parts.count == 3, let number = parsedNumber(parts[1]), let target = message(numbered: number) else { return "usage: \(parts[0]) N 👍" }
                let changed = parts[0] == "/react" ? try await client.react(parts[2], to: target.id, in: id)
                                                   : try await client.unreact(parts[2], from: target.id, in: id)
                if let index = messages.firstIndex(where: { $0.id == changed.id }) { messages[index] = changed }
                return parts[0] == "/react" ? "reacted \(parts[2]) to #\(number)" : "took back \(parts[2]) from #\(number)"
            case "/pin", "/unpin":
                guard parts.count == 2, let number = parsedNumber(parts[1]), let target = message(numbered: number) else { return "usage: \(parts[0]) N" }
                let changed = parts[0] == "/pin" ? try await client.pin(target.id, in: id) : try await client.unpin(target.id, in: id)
                if let index = messages.firstIndex(where: { $0.id == changed.id }) { messages[index] = changed }
                return parts[0] == "/pin" ? "pinned #\(number)" : "unpinned #\(number)"
            case "/vote":
                let words = line.split(separator: " ").dropFirst().map(String.init)
                guard let first = words.first, let number = parsedNumber(first), let target = message(numbered: number),
                      case .poll? = target.content else { return "usage: /vote N [option…] (N: the poll's number; no option takes your vote back)" }
                let choices = words.dropFirst().compactMap { Int($0) }.map { $0 - 1 }
                guard choices.count == words.count - 1, choices.allSatisfy({ $0 >= 0 }) else { return "options are numbered from 1" }
                let voted = try await client.vote(choices, in: target.id, conversation: id)
                if let index = messages.firstIndex(where: { $0.id == voted.id }) { messages[index] = voted }
                return choices.isEmpty ? "took your vote back in #\(number)" : "voted in #\(number)"
            case "/delete":
                let numbers = line.split(separator: " ").dropFirst().compactMap { parsedNumber(String($0)) }
                let targets = numbers.compactMap(message(numbered:))
                guard !targets.isEmpty, targets.count == numbers.count else { return "usage: /delete N [N…]" }
                guard targets.allSatisfy({ $0.sender.id == me.id }) else { return "you can only delete your own messages" }
                try await client.delete(targets.map(\.id), in: id)
                return "deleted \(numbers.map { "#\($0)" }.joined(separator: " "))"
            default:
                return help
            }
        }

        /// What is on screen has been read: move the read watermark (the sender sees ✓✓ read).
        func markShownRead() async {
            guard scroll == 0, let newest = messages.last?.seq, newest > readUpTo else { return }
            readUpTo = newest
            try? await client.markRead(id, upTo: newest)
        }

        redraw()
        await markShownRead()
        for await event in inputs {
            switch event {
            case .key(.interrupt), .key(.endOfInput):
                await client.disconnect()
                return
            case .key(.character(let character)):
                input.append(character)
                notice = nil
                if Date().timeIntervalSince(lastTypingSent) > 3 {
                    lastTypingSent = Date()
                    await client.setTyping(true, in: id)
                }
            case .key(.backspace):
                if !input.isEmpty { input.removeLast() }
            case .key(.pageUp), .key(.up):
                let layout = ChatLayout(width: terminal.size.width, height: terminal.size.height)
                var step = layout.height - 5
                if case .key(.up) = event { step = 1 }
                if scroll + step > layout.maxScroll(for: bubbles()), hasOlder, let oldest = messages.first?.seq {
                    let earlier = try await client.history(of: id, before: oldest)
                    let before = layout.lines(for: bubbles()).count
                    messages = earlier.messages + messages
                    hasOlder = earlier.hasOlder
                    scroll += layout.lines(for: bubbles()).count - before  // keep the view where it was
                }
                scroll = min(scroll + step, layout.maxScroll(for: bubbles()))
            case .key(.pageDown), .key(.down):
                var step = terminal.size.height - 5
                if case .key(.down) = event { step = 1 }
                scroll = max(0, scroll - step)
            case .key(.enter):
                let line = input.trimmingCharacters(in: .whitespaces)
                input = ""
                lastTypingSent = .distantPast
                await client.setTyping(false, in: id)
                do {
                    notice = try await perform(line)
                } catch {
                    notice = "\(error)"
                }
                if line == "/quit" {
                    await client.disconnect()
                    return
                }
            case .live(.event(let event)) where event.conversationID == id && event.type == .receiptUpdated:
                // Another member's watermarks moved: every message of mine up to them reads so.
                if let user = event.userID, user != me.id, watermarks[user] != nil {
                    watermarks[user] = (max(watermarks[user]?.delivered ?? 0, event.deliveredSeq ?? 0), max(watermarks[user]?.read ?? 0, event.readSeq ?? 0))
                    retick()
                }
            case .live(.event(let event)) where event.conversationID == id:
                if let message = event.message {
                    // Its sender has seen everything up to it (the server's rule).
                    if event.type == .messageCreated, message.sender.id != me.id, let marks = watermarks[message.sender.id] {
                        watermarks[message.sender.id] = (max(marks.delivered, message.seq), max(marks.read, message.seq))
                        retick()
                    }
                    names[message.sender.id] = message.sender.displayName
                    if let root = event.thread?.rootID, let index = messages.firstIndex(where: { $0.id == root }) {
                        messages[index] = messages[index].updated(by: event, me: me.id)   // its reply count
                    }
                    if let index = messages.firstIndex(where: { $0.id == message.id }) {
                        messages[index] = messages[index].updated(by: event, me: me.id)
                    } else if event.type == .messageCreated, message.threadID == nil || message.alsoInConversation == true {
                        pending.removeAll { $0.clientID == message.clientID && message.sender.id == me.id }
                        messages.append(message)
                    }
                    if event.type != .messagePreviewed { typing[message.sender.id] = nil }  // the server's doing, not theirs
                }
            case .live(.typing(let conversation, let user, let isTyping, let expiresIn, nil)) where conversation == id:
                typing[user] = isTyping ? (names[user] ?? "someone", Date().addingTimeInterval(Double(expiresIn.components.seconds))) : nil
            case .outgoing(let update) where update.conversationID == id:
                switch update.status {
                case .sending: break
                case .sent(let message):
                    pending.removeAll { $0.clientID == update.clientID }
                    if !messages.contains(where: { $0.id == message.id }) { messages.append(message) }
                    statuses[message.id] = statuses[message.id] ?? .sent
                case .deliveredToSome:
                    break  // some of the group or channel have it: the bubble stays "sent" until all do
                case .delivered, .read:
                    if let message = messages.first(where: { $0.clientID == update.clientID && $0.sender.id == me.id }) {
                        statuses[message.id] = update.status == .read ? .read : .delivered
                    }
                case .failed(let error):
                    if let index = pending.firstIndex(where: { $0.clientID == update.clientID }) { pending[index].status = .failed }
                    notice = "not sent: \(error)"
                }
            case .state(let state):
                connection = "\(state)"
                if state == .online, let peer {
                    if let presence = try? await client.presence(of: [peer]).first { peerPresence = presenceText(presence) }
                }
            case .live(.presence(let presence)) where presence.userID == peer:
                peerPresence = presenceText(presence)
            default:
                break
            }
            redraw()
            await markShownRead()
        }
    }

    /// `👍 2  🎉 1`, with the user's own in brackets (`[👍 2]`); nil when there are none.
    static func reactionLine(_ message: Message) -> String? {
        let mine = Set(message.myReactions ?? [])
        var parts = (message.reactions ?? []).map { mine.contains($0.emoji) ? "[\($0.emoji) \($0.count)]" : "\($0.emoji) \($0.count)" }
        if let replies = message.replyCount { parts.append(replies == 1 ? "💬 1 reply" : "💬 \(replies) replies") }
        return parts.isEmpty ? nil : parts.joined(separator: "  ")
    }

    static func describe(_ message: Message) -> String {
        switch message.content {
        case .text(let text)?: text + previewLine(message)
        case .markdown(let text)?: ChatLayout.plainMarkdown(text) + previewLine(message)
        case .location(let location)?:
            "📍 \(location.latitude),\(location.longitude)" + (location.name.map { " \($0)" } ?? "") + (location.caption.map { " — \($0)" } ?? "")
        case .photo(let media)?, .video(let media)?, .audio(let media)?, .file(let media)?:
            "[\(message.content?.typeName ?? "media")] \(media.name ?? media.caption ?? media.attachmentID)"
        case .poll(let poll)?: pollLine(poll, message)
        case .custom(let type, _)?: "[\(type)]"
        case .system(let text)?: "— \(text) —"
        case nil: ""
        }
    }
}
