import Foundation
import Parley
import ParleyOptions
import ParleyTerminalUI
import ParleyWire

// parley: the terminal client. Scriptable commands over the Parley SDK; state (token,
// position, outbox) in $PARLEY_HOME/state.json (0600), the server and app key in
// $PARLEY_HOME/config.json. Exit codes are documented in `parley --help`.

let overview = """
    parley: chat with a Parley server from the terminal.

    USAGE: parley [--server URL] [--app-key KEY] <command> [arguments]

    COMMANDS:
      register <username> [--display-name NAME]   create an account and sign in
      login <username>                            sign in (this device)
      logout [--everywhere]                       sign out this device (or every device)
      delete-account --yes [--erase]              delete your account for good (--erase: your messages too)
      whoami                                      the signed-in user
      users search [QUERY] [--limit N] [--sort S] find people by username or display name
      conversations [--limit N]                   your conversations, newest first, with unread counts
      send <conversation> <text…>                 send a message (queued if the server is down)
      send --to alice,bob <text…>                 send to people by username (direct or group)
           … --location LAT,LON                   send a location instead of text
      send <conversation> --photo PATH [caption…] upload and send a photo (also --file, --audio,
                                                  --video PATH --thumbnail IMAGE [--duration S])
      download <attachment> [--thumbnail] [--output PATH]   save an attachment (cached)
      history <conversation> [--limit N] [--before SEQ] [--json]
      edit <conversation> <message> <text…>       change one of your messages
      react <conversation> <message> <emoji> [--remove]   react to a message (or take it back)
      reactions <conversation> <message> [--emoji E]      who reacted, oldest first
      poll <conversation> <question> <option> <option>… [--multiple] [--anonymous] [--closes TIME]   ask a poll
      vote <conversation> <message> [N…]          vote for options 1, 2, … (none: take your vote back)
      close-poll <conversation> <message>         close your poll (or, as a moderator, anyone's)
      pin <conversation> <message> [--remove]     pin a message (or unpin it); pins <conversation> lists them
      mentions [--limit N]                        messages that mention you, newest first
      thread <conversation> <message> [text…] [--also]   a thread's replies, or reply in it
      export [--conversation ID] [--output PATH]  everything of yours (or a conversation you own) as NDJSON
      report <conversation> <message> <reason> [--note TEXT]   report a message to the moderators
      block <user-id> [--remove]                  receive nothing from someone in direct chats (or unblock)
      ban <conversation> <user-id> [--hours N] [--note REASON] [--remove]   moderators: ban (or lift a ban)
      delete <conversation> <message>…            delete your messages (all or none)
      listen [--conversation ID] [--json]         print events as they arrive, until interrupted
      chat <conversation>                         the full-screen chat (type, Enter; /edit, /delete, /quit)
      push register <token> [--fcm] [--sandbox]   register a phone's push token for this account (testing by hand)
      push list | push unregister                 the account's push devices; stop pushes to this session's
      mute <conversation> [--hours N] | unmute <conversation>   no push for a conversation (for N hours)
      notify <conversation> all|mentions|default  what pushes you there: every message, or only mentions

    Passwords are read from PARLEY_PASSWORD, else from the first line of standard input.
    The server and app key come from --server/--app-key, else PARLEY_SERVER/PARLEY_APP_KEY,
    else what the last register or login saved. `parley <command> --help` for one command.

    EXIT CODES:
      0  done
      1  the server refused (the message says why)
      2  usage error
      3  the server cannot be reached (a send stays queued and goes with the next command)
      4  not signed in: run `parley login <username>`
    """

let commandHelp: [String: String] = [
    "register": "parley register <username> [--display-name NAME]\n  Creates the account (password from PARLEY_PASSWORD or standard input) and signs in.",
    "login": "parley login <username>\n  Signs in on this device (password from PARLEY_PASSWORD or standard input).",
    "logout": "parley logout [--everywhere]\n  Signs out this device, or every device of the account.",
    "whoami": "parley whoami\n  Prints: username, display name, user id.",
    "delete-account": "parley delete-account --yes [--erase] [--no-password]\n  Deletes your account for good: every device is signed out and the username is freed. --erase also turns every message you sent into a tombstone. The password is read from PARLEY_PASSWORD or standard input; --no-password for an account without one (a guest, or one your app made: sign in less than 10 minutes before).",
    "users": "parley users search [QUERY] [--limit N] [--offset N] [--sort username|-username|displayName|-displayName|createdAt|-createdAt]\n  Prints one user per line: username, display name, id.",
    "conversations": "parley conversations [--limit N] [--archived] [--custom-data NAME=VALUE[,NAME=VALUE…]]\n  Prints one conversation per line, the ones you pinned first (📌): id, kind, name, unread count ('marked' when you marked it unread), last message. --archived lists the ones you archived instead. --custom-data keeps those whose custom data has each field at that value (up to 4).",
    "send": "parley send <conversation> <text…> [--at TIME] | parley send --to alice,bob <text…> [--location LAT,LON]\n       parley send <conversation> (--photo PATH | --file PATH | --audio PATH | --video PATH --thumbnail IMAGE [--duration S]) [caption…]\n  Prints the message id and seq. To a conversation, the message goes through the outbox: if the server is down it is kept and sent by the next command that reaches it (exit 3). Media is uploaded first (progress on standard error) and the words become its caption.",
    "download": "parley download <attachment> [--thumbnail] [--output PATH]\n  Saves an attachment you may see (a photo's server-made thumbnail with --thumbnail) to PATH, or to its name in the current directory. Downloads are cached.",
    "history": "parley history <conversation | @username | title> [--limit N] [--before SEQ] [--json]\n  Prints messages oldest first: seq, id, sender, time, text.",
    "edit": "parley edit <conversation> <message> <text…>\n  Replaces the text of one of your messages.",
    "delete": "parley delete <conversation> <message>…\n  Deletes your messages, all or none.",
    "poll": "parley poll <conversation> <question> <option> <option>… [--multiple] [--anonymous] [--closes TIME]\n  Sends a poll of 2–10 options that the server counts. --multiple lets people choose several; --anonymous shows counts only, never who voted; --closes stops the votes at that time. Quote a question or option with spaces.",
    "vote": "parley vote <conversation> <message> [N…]\n  Votes in a poll for options N (1 is the first), replacing your earlier vote; with no N, takes your vote back. Prints the poll with its counts, your choices marked ✓.",
    "close-poll": "parley close-poll <conversation> <message>\n  Closes a poll you sent (moderators: anyone's): it takes no more votes.",
    "react": "parley react <conversation> <message> <emoji> [--remove]\n  Adds your reaction (one emoji) to a message, or takes it back with --remove. Prints the message's reactions: emoji and count, yours in brackets.",
    "reactions": "parley reactions <conversation> <message> [--emoji E] [--limit N]\n  Prints who reacted, oldest first: emoji, username, display name, time.",
    "pin": "parley pin <conversation> <message> [--remove] | parley pin <conversation> [--remove] | parley pin --order ID,ID…\n  With a message: pins it in the conversation (any member; in a public channel owners and admins), or unpins it with --remove. Without: pins the conversation to the top of your own list (or unpins it). --order pins exactly these conversations, top first, and unpins the rest.",
    "archive": "parley archive <conversation> [--remove]\n  Takes a conversation out of your list until a new message arrives in it (a muted one stays archived), or brings it back with --remove. `parley conversations --archived` lists them.",
    "scheduled": "parley scheduled [--conversation ID] [--cancel SCHEDULED-ID]\n  Prints your scheduled messages, soonest first (id, conversation, time, status, text; failed ones with why), or cancels one. Schedule with `parley send <conversation> --at TIME <text…>`.",
    "draft": "parley draft <conversation> [text…] [--thread MESSAGE] [--clear]\n  Without text: prints your draft there (from any of your devices). With text: saves it as your draft, shown on your other devices; --clear clears it.",
    "mark-unread": "parley mark-unread <conversation> [--remove]\n  Shows a conversation as unread in your list (your read position stays), or clears the mark with --remove.",
    "pins": "parley pins <conversation>\n  Prints the pinned messages, most recently pinned first: seq, id, sender, text.",
    "thread": "parley thread <conversation> <message> [--limit N] | parley thread <conversation> <message> <text…> [--also]\n  Without text: prints the thread under the message — the root, then its replies oldest first (seq, id, sender, time, text) — and marks them read. With text: replies in the thread (queued like send; --also shows the reply in the conversation too) and prints the reply's id and seq.",
    "export": "parley export [--conversation ID] [--output PATH]\n  Saves everything of yours (account, conversations, your messages, your uploads) — or, with --conversation, a conversation you own — as NDJSON, one JSON object per line, to PATH (default: parley-export.ndjson here). Prints the path and the counts.",
    "report": "parley report <conversation> <message> <spam|abuse|inappropriate|other> [--note TEXT]\n  Reports a message to the conversation's owners and admins. Prints the report's id.",
    "block": "parley block <user-id> [--remove]\n  Blocks someone (you stop seeing their messages, reactions and typing everywhere, and they cannot add you to groups; they are not told), or unblocks them with --remove. `parley block --list` prints the people you blocked.",
    "search": "parley search [WORDS…] [--conversation ID] [--from USERNAME] [--after TIME] [--before TIME] [--kind text|markdown|photo|video|audio|file|location|custom|system] [--has-attachment | --no-attachment] [--thread MESSAGE] [--limit N] [--cursor C]\n  Searches your conversations' messages (words optional when a filter is given), best match first (newest first without words): conversation, id, sender, time, text. TIME is like 2026-12-02T12:00:00Z. Prints 'next: C' when there is another page.",
    "ban": "parley ban <conversation> <user-id> [--hours N] [--note REASON] [--remove]\n  Owners and admins: bans someone from a group or channel (removed at once; cannot join again until N hours pass or the ban is lifted), or lifts it with --remove.",
    "mentions": "parley mentions [--limit N]\n  Prints the messages that mention you, newest first: conversation, id, sender, time, text.",
    "chat": "parley chat <conversation | @username | title>\n  A full-screen chat: your messages on the right with #number, time and status (… sending, ✓ sent, ✓✓ delivered, ✓✓ read), others on the left with their names; a typing line. Enter sends; /edit N text and /delete N… change your messages; PgUp/PgDn (or ↑/↓) scroll, loading earlier history at the top; /quit or Ctrl-C leaves.",
    "listen": "parley listen [--conversation ID] [--json]\n  Connects and prints every event as it arrives (JSON lines with --json) until interrupted.",
    "push": "parley push register <token> [--fcm] [--sandbox] | parley push list | parley push unregister\n  Registers a push token for this session (an APNs token in hex, or an FCM token with --fcm; --sandbox for an APNs token of a development build), lists the account's devices (id, platform, environment, token), or removes this session's. For testing a real phone by hand: copy the token the app logged.",
    "mute": "parley mute <conversation> [--hours N]\n  No push for this conversation for N hours, or until unmuted.",
    "unmute": "parley unmute <conversation>\n  Ends a mute.",
    "notify": "parley notify <conversation> all|mentions|default\n  What pushes you in this conversation: every new message, only messages that mention you, or the default (all in direct chats, groups and private channels; mentions in public channels).",
]

/// A command-line mistake.
struct UsageError: Error { var message: String }
/// Something the command line named that is not there (exit 1, unlike a usage mistake).
struct NotFound: Error, CustomStringConvertible { var message: String; var description: String { message } }

/// Everything the command line can set. Each option is declared once (``Arguments/globalOptions``,
/// ``Arguments/commandOptions``): its flag, environment variable, help and type.
struct CommandLineSettings {
    var multiple = false
    var anonymous = false
    var closesAt: Date?
    var server: String?
    var appKey: String?
    var help = false
    var json = false
    var everywhere = false
    var yes = false
    var erase = false
    var noPassword = false
    var displayName: String?
    var limit: Int?
    var offset: Int?
    var before: Int64?
    var sort: UserSort = .username
    var to: String?
    var location: String?
    var photo: String?
    var fcm = false
    var sandbox = false
    var hours: Int?
    var video: String?
    var audio: String?
    var file: String?
    var thumbnailImage: String?
    var noPreview = false
    var duration: Double?
    var thumbnail = false
    var output: String?
    var conversation: String?
    var remove = false
    var also = false
    var note: String?
    var list = false
    var emoji: String?
    var from: String?
    var after: Date?
    var beforeTime: Date?
    var kind: String?
    var hasAttachment = false
    var noAttachment = false
    var thread: String?
    var cursor: String?
    var customData: String?
    var archived = false
    var clear = false
    var cancel: String?
    var sendAt: Date?
    var order: String?
}

/// The parsed command line: the command, its positional words and the settings.
struct Arguments {
    typealias Declared = Option<CommandLineSettings>

    /// The command's name and the words after it.
    var words: [String] = []
    var settings = CommandLineSettings()

    /// Options every command takes.
    static var globalOptions: [Declared] {
        [
            .text("--server", "PARLEY_SERVER", \.server, value: "<url>", help: "The server (else what the last register or login saved)."),
            .text("--app-key", "PARLEY_APP_KEY", \.appKey, value: "<key>", help: "The app's public key (else the saved one)."),
            .toggle("--help", nil, \.help, help: "Show the command's help."),
        ]
    }

    /// Each command's own options. The same flag may mean different things to two commands
    /// (`download --thumbnail` is a switch, `send --thumbnail IMAGE` a file).
    static var commandOptions: [String: [Declared]] {
        let limit = Declared.integer("--limit", nil, in: 1...200, \.limit, help: "How many (the server's default otherwise).")
        let json = Declared.toggle("--json", nil, \.json, help: "Print JSON instead of columns.")
        func time(_ flag: String, _ path: WritableKeyPath<CommandLineSettings, Date?>, help: String) -> Declared {
            Declared(flag, value: "<time>", environment: nil, help: help) { settings, text, source in
                guard let date = WireCoding.parseDate(text) else { throw OptionError("\(source) must be a time like 2026-12-02T12:00:00Z, not '\(text)'") }
                settings[keyPath: path] = date
            }
        }
        let seconds = Declared("--duration", value: "<s>", environment: nil, help: "The clip's length in seconds.") { settings, text, source in
            guard let value = Double(text), value.isFinite, value >= 0 else { throw OptionError("\(source) must be a number of seconds, not '\(text)'") }
            settings.duration = value
        }
        return [
            "register": [.text("--display-name", nil, \.displayName, value: "<name>", help: "The name others see (default: the username).")],
            "login": [],
            "logout": [.toggle("--everywhere", nil, \.everywhere, help: "Sign out every device of the account.")],
            "whoami": [],
            "delete-account": [.toggle("--yes", nil, \.yes, help: "Confirm: the account cannot be restored."),
                               .toggle("--erase", nil, \.erase, help: "Also erase every message you sent."),
                               .toggle("--no-password", nil, \.noPassword, help: "The account has no password (a guest, or made by the app).")],
            "users": [limit, .integer("--offset", nil, in: 0...10_000, \.offset, help: "Skip this many."),
                      .choice("--sort", nil, \.sort, help: "The order (default username; '-' first for descending).")],
            "conversations": [limit, .text("--custom-data", nil, \.customData, value: "<name=value,…>",
                                           help: "Only conversations whose custom data has each field at that value."),
                              .toggle("--archived", nil, \.archived, help: "The conversations you archived instead.")],
            "send": [
                .text("--to", nil, \.to, value: "<alice,bob>", help: "Send to people by username (the direct chat or the group of exactly them)."),
                time("--at", \.sendAt, help: "Schedule it: the server sends it at this time (parley scheduled lists them)."),
                .text("--location", nil, \.location, value: "<lat,lon>", help: "Send a location instead of text."),
                .text("--photo", nil, \.photo, value: "<path>", help: "Upload and send a photo; the words become its caption."),
                .text("--video", nil, \.video, value: "<path>", help: "Upload and send a video (needs --thumbnail)."),
                .text("--audio", nil, \.audio, value: "<path>", help: "Upload and send an audio clip."),
                .text("--file", nil, \.file, value: "<path>", help: "Upload and send any file."),
                .text("--thumbnail", nil, \.thumbnailImage, value: "<image>", help: "A video's still (JPEG or PNG)."),
                .toggle("--no-preview", nil, \.noPreview, help: "No link preview for this message, now or after an edit."),
                seconds,
            ],
            "download": [.toggle("--thumbnail", nil, \.thumbnail, help: "Save a photo's server-made thumbnail instead."),
                         .text("--output", nil, \.output, value: "<path>", help: "Where to save it (default: its name, here).")],
            "history": [limit, .integer("--before", nil, in: 0...Int64.max, \.before, value: "<seq>", help: "Messages before this seq."), json],
            "edit": [],
            "delete": [],
            "react": [.toggle("--remove", nil, \.remove, help: "Take the reaction back.")],
            "reactions": [.text("--emoji", nil, \.emoji, value: "<emoji>", help: "Only this emoji's."), limit],
            "poll": [.toggle("--multiple", nil, \.multiple, help: "People may choose several options."),
                     .toggle("--anonymous", nil, \.anonymous, help: "Show counts only, never who voted."),
                     time("--closes", \.closesAt, help: "Stop taking votes at this time.")],
            "vote": [],
            "close-poll": [],
            "pin": [.toggle("--remove", nil, \.remove, help: "Unpin the message or conversation."),
                    .text("--order", nil, \.order, value: "<id,id,…>", help: "Pin exactly these conversations, top first.")],
            "archive": [.toggle("--remove", nil, \.remove, help: "Bring it back to your list.")],
            "mark-unread": [.toggle("--remove", nil, \.remove, help: "Clear the mark.")],
            "scheduled": [.text("--conversation", nil, \.conversation, value: "<id>", help: "Only this conversation's."),
                          .text("--cancel", nil, \.cancel, value: "<sm_…>", help: "Cancel this one (or dismiss it, when it failed).")],
            "draft": [.text("--thread", nil, \.thread, value: "<message>", help: "The draft of a reply in the thread under this message."),
                      .toggle("--clear", nil, \.clear, help: "Clear the draft.")],
            "pins": [],
            "mentions": [limit],
            "search": [limit, .text("--conversation", nil, \.conversation, value: "<id>", help: "Only this conversation."),
                       .text("--from", nil, \.from, value: "<username>", help: "Only messages this person sent."),
                       time("--after", \.after, help: "Only messages sent at or after this time."),
                       time("--before", \.beforeTime, help: "Only messages sent before this time."),
                       .text("--kind", nil, \.kind, value: "<type>", help: "Only this content type (text, photo, audio, …)."),
                       .toggle("--has-attachment", nil, \.hasAttachment, help: "Only messages with an attachment."),
                       .toggle("--no-attachment", nil, \.noAttachment, help: "Only messages without one."),
                       .text("--thread", nil, \.thread, value: "<message>", help: "Only replies in the thread under this message."),
                       .text("--cursor", nil, \.cursor, value: "<c>", help: "The next page, as the last one printed it.")],
            "export": [.text("--conversation", nil, \.conversation, value: "<id>", help: "A conversation you own instead of your account."),
                       .text("--output", nil, \.output, value: "<path>", help: "Where to save it (default: parley-export.ndjson).")],
            "report": [.text("--note", nil, \.note, value: "<text>", help: "More for the moderators.")],
            "block": [.toggle("--remove", nil, \.remove, help: "Unblock."), .toggle("--list", nil, \.list, help: "Print the people you blocked.")],
            "ban": [.integer("--hours", nil, in: 1...87_600, \.hours, help: "How long (default: until lifted)."),
                    .text("--note", nil, \.note, value: "<reason>", help: "The reason, for the record and the event."),
                    .toggle("--remove", nil, \.remove, help: "Lift the ban.")],
            "thread": [limit, .toggle("--also", nil, \.also, help: "Show the reply in the conversation too.")],
            "chat": [],
            "listen": [.text("--conversation", nil, \.conversation, value: "<id>", help: "Only this conversation's events."), json],
            "push": [.toggle("--fcm", nil, \.fcm, help: "The token is an FCM registration token (default: APNs, in hex)."),
                     .toggle("--sandbox", nil, \.sandbox, help: "An APNs token of a build signed for development.")],
            "mute": [.integer("--hours", nil, in: 1...8_760, \.hours, help: "How long (default: until unmuted).")],
            "unmute": [],
            "notify": [],
        ]
    }

    /// The parser for `command` (nil: the globals only).
    static func parser(for command: String?) -> OptionParser<CommandLineSettings> {
        OptionParser(globalOptions + (command.flatMap { commandOptions[$0] } ?? []))
    }

    init(_ raw: [String], environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        // The command is the first word that is not a global option's value.
        var command: String?
        var index = 0
        while index < raw.count {
            let argument = raw[index]
            if argument == "--server" || argument == "--app-key" {
                index += 2
                continue
            }
            if !argument.hasPrefix("-") {
                command = argument
                break
            }
            index += 1
        }
        let arguments = raw.map { $0 == "-h" ? "--help" : $0 }
        let known = command.map { Self.commandOptions[$0] != nil || $0 == "help" } ?? true
        do {
            (words, _) = try Self.parser(for: known ? command : nil).parse(arguments, environment: environment, into: &settings)
        } catch {
            throw UsageError(message: error.message)
        }
    }

    /// `--help` text for `command`: its usage, then its options as declared.
    static func help(for command: String) -> String? {
        guard let usage = commandHelp[command] else { return nil }
        return usage + "\n\nOPTIONS:\n" + parser(for: command).helpLines(flagWidth: 26)
    }
}

/// Where the CLI keeps its files.
enum Home {
    static var directory: String {
        if let home = ProcessInfo.processInfo.environment["PARLEY_HOME"] { return home }
        return (ProcessInfo.processInfo.environment["HOME"] ?? ".") + "/.config/parley"
    }
    static var statePath: String { directory + "/state.json" }
    static var configPath: String { directory + "/config.json" }

    struct Config: Codable { var server: String; var appKey: String }

    static func loadConfig() -> Config? {
        guard let data = FileManager.default.contents(atPath: configPath) else { return nil }
        return try? JSONDecoder().decode(Config.self, from: data)
    }

    static func save(_ config: Config) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        _ = FileManager.default.createFile(atPath: configPath, contents: try JSONEncoder().encode(config), attributes: [.posixPermissions: 0o600])
    }
}

func output(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func complain(_ line: String) {
    FileHandle.standardError.write(Data(("parley: " + line + "\n").utf8))
}

func password() throws -> String {
    if let password = ProcessInfo.processInfo.environment["PARLEY_PASSWORD"] { return password }
    // On a terminal, a prompt with the typing hidden; from a pipe, the first line as it comes.
    let typed = isatty(STDIN_FILENO) == 1 ? promptHidden("Password: ") : readLine(strippingNewline: true)
    guard let line = typed, !line.isEmpty else {
        throw UsageError(message: "no password: set PARLEY_PASSWORD or write it on standard input")
    }
    return line
}

/// Reads a line from the terminal with echo off, after `prompt` on standard error.
func promptHidden(_ prompt: String) -> String? {
    var saved = termios()
    guard tcgetattr(STDIN_FILENO, &saved) == 0 else {
        FileHandle.standardError.write(Data(prompt.utf8))
        return readLine(strippingNewline: true)
    }
    // Echo off before the prompt shows, and without flushing: what is typed at once is kept.
    var quiet = saved
    quiet.c_lflag &= ~tcflag_t(ECHO)
    _ = tcsetattr(STDIN_FILENO, TCSANOW, &quiet)
    defer {
        _ = tcsetattr(STDIN_FILENO, TCSANOW, &saved)
        FileHandle.standardError.write(Data("\n".utf8))
    }
    FileHandle.standardError.write(Data(prompt.utf8))
    return readLine(strippingNewline: true)
}

func text(of message: Message) -> String {
    if message.deletedAt != nil { return "(deleted)" }
    let pin = message.pinnedAt != nil ? "📌 " : ""
    let reactions = ChatScreen.reactionLine(message).map { "  " + $0 } ?? ""
    return pin + body(of: message) + reactions
}

/// A message's link preview on one line (`  🔗 Ridge trail, 14 km — Trails`); "" without one.
func previewLine(_ message: Message) -> String {
    guard let preview = message.linkPreview else { return "" }
    let parts = [preview.title, preview.siteName ?? URLComponents(string: preview.url)?.host].compactMap { $0 }
    return parts.isEmpty ? "" : "  🔗 " + parts.joined(separator: " — ")
}

func body(of message: Message) -> String {
    switch message.content {
    case .text(let text)?: return text + (message.editedAt != nil ? " (edited)" : "") + previewLine(message)
    case .markdown(let text)?: return ChatLayout.plainMarkdown(text) + (message.editedAt != nil ? " (edited)" : "") + previewLine(message)
    case .location(let location)?: return "📍 \(location.latitude),\(location.longitude)" + (location.caption.map { " — \($0)" } ?? "")
    case .photo(let media)?, .video(let media)?, .audio(let media)?, .file(let media)?:
        return "[\(message.content?.typeName ?? "media")] \(media.name ?? media.caption ?? media.attachmentID)"
    case .poll(let poll)?: return pollLine(poll, message)
    case .custom(let type, _)?: return "[\(type)]"
    case .system(let text)?: return "— \(text) —"
    case nil: return ""
    }
}

/// A poll on one line: `📊 Lunch? 1) Pizza ·3 ✓  2) Sushi ·1  (4 voted, closed)`; ✓ marks the
/// user's own votes when the server said them (REST answers).
func pollLine(_ poll: PollContent, _ message: Message) -> String {
    let options = poll.options.enumerated().map { index, text in
        let votes = message.poll?.options.indices.contains(index) == true ? message.poll?.options[index].votes ?? 0 : 0
        return "\(index + 1)) \(text) ·\(votes)" + (message.myVotes?.contains(index) == true ? " ✓" : "")
    }.joined(separator: "  ")
    var notes = ["\(message.poll?.voterCount ?? 0) voted"]
    if poll.multipleChoice { notes.append("several answers") }
    if poll.anonymous { notes.append("anonymous") }
    if message.poll?.isClosed(poll) == true { notes.append("closed") }
    return "📊 \(poll.question) \(options)  (\(notes.joined(separator: ", ")))"
}

func time(_ date: Date) -> String {
    WireCoding.formatDate(date)
}

func json(_ value: some Encodable) throws -> String {
    let encoder = WireCoding.encoder()
    return String(decoding: try encoder.encode(value), as: UTF8.self)
}

func content(_ arguments: Arguments, words: ArraySlice<String>) throws -> MessageContent {
    if let location = arguments.settings.location {
        let parts = location.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
        guard parts.count == 2, let latitude = parts[0], let longitude = parts[1] else {
            throw UsageError(message: "--location is LAT,LON, for example 52.52,13.405")
        }
        return .location(Location(latitude: latitude, longitude: longitude))
    }
    let text = words.joined(separator: " ")
    guard !text.isEmpty else { throw UsageError(message: "write the message after the conversation (or use --location)") }
    return .text(text)
}

/// The media `send` was asked to upload, if any.
func outgoingMedia(_ arguments: Arguments) throws -> OutgoingMedia? {
    let settings = arguments.settings
    func file(_ option: String, _ path: String?) throws -> URL? {
        guard let path else { return nil }
        guard FileManager.default.isReadableFile(atPath: path) else { throw UsageError(message: "--\(option): cannot read \(path)") }
        return URL(fileURLWithPath: path)
    }
    let chosen = [settings.photo, settings.video, settings.audio, settings.file].compactMap { $0 }
    guard chosen.count <= 1 else { throw UsageError(message: "send one of --photo, --video, --audio or --file at a time") }
    if let photo = try file("photo", settings.photo) { return .photo(try Data(contentsOf: photo)) }
    if let audio = try file("audio", settings.audio) { return .audio(file: audio, durationSeconds: settings.duration) }
    if let any = try file("file", settings.file) { return .file(any) }
    if let video = try file("video", settings.video) {
        guard let thumbnail = try file("thumbnail", settings.thumbnailImage) else {
            throw UsageError(message: "--video needs --thumbnail IMAGE (a JPEG or PNG still)")
        }
        return .video(file: video, thumbnail: try Data(contentsOf: thumbnail), durationSeconds: settings.duration)
    }
    return nil
}

/// Connects, uploads with a progress line on standard error, and waits for the message.
func sendMedia(_ client: ParleyClient, _ media: OutgoingMedia, to conversation: ConversationID, caption: String?) async throws -> Message {
    guard await client.currentUser != nil else { throw ParleyError.notSignedIn }
    let states = await client.connectionStates()
    await client.connect()
    let transfer: MediaTransfer<Message>
    do {
        transfer = try await client.send(media, to: conversation, caption: caption)
    } catch {
        await client.disconnect()
        throw error
    }
    let showProgress = isatty(STDERR_FILENO) == 1
    for await step in transfer.progress where showProgress {
        FileHandle.standardError.write(Data("\ruploading \(Int(step.fraction * 100))% (\(step.sentBytes) of \(step.totalBytes) bytes)".utf8))
    }
    if showProgress { FileHandle.standardError.write(Data("\n".utf8)) }
    // The message goes through the outbox: wait for the ack, a refused session, or 30 s.
    let outcome = await Result { try await firstOutcome(of: Task { try await transfer.value }, states: states, seconds: 30) }
    await client.disconnect()
    return try outcome.get()
}

func run(_ raw: [String]) async throws {
    let arguments = try Arguments(raw)
    guard let command = arguments.words.first else {
        output(overview)
        return
    }
    let settings = arguments.settings
    if settings.help || command == "help" {
        let topic = command == "help" ? arguments.words.dropFirst().first : command
        output(topic.flatMap { Arguments.help(for: $0) } ?? overview)
        return
    }
    let saved = Home.loadConfig()
    guard let given = settings.server ?? saved?.server, let appKey = settings.appKey ?? saved?.appKey else {
        throw UsageError(message: "which server? pass --server URL --app-key KEY (or set PARLEY_SERVER and PARLEY_APP_KEY)")
    }
    let server = try serverURL(given)
    if appKey.hasPrefix("sk_") {
        throw UsageError(message: "--app-key is the app's public pk_… key; sk_… is the app secret, which stays on your backend")
    }
    let client = ParleyClient(server: server, appKey: appKey, store: FileStateStore(path: Home.statePath))
    let words = arguments.words.dropFirst()

    switch command {
    case "register", "login":
        guard let username = words.first else { throw UsageError(message: "\(command) needs a username") }
        let user = command == "register"
            ? try await client.register(username: username, password: try password(), displayName: settings.displayName, device: "parley CLI")
            : try await client.signIn(username: username, password: try password(), device: "parley CLI")
        try Home.save(.init(server: server, appKey: appKey))
        output("signed in as \(user.username) (\(user.id.rawValue))")
    case "logout":
        try await client.signOut(everywhere: settings.everywhere)
        output("signed out")
    case "delete-account":
        guard settings.yes else {
            throw UsageError(message: "deleting the account cannot be undone: run 'parley delete-account --yes' to confirm")
        }
        try await client.deleteAccount(password: settings.noPassword ? nil : try password(), erase: settings.erase)
        output(settings.erase ? "account deleted, with every message you sent" : "account deleted")
    case "whoami":
        guard let user = await client.currentUser else { throw ParleyError.notSignedIn }
        output("\(user.username)\t\(user.displayName)\t\(user.id.rawValue)")
    case "users":
        guard words.first == "search" else { throw UsageError(message: "try: parley users search [QUERY]") }
        let page = try await client.searchUsers(words.dropFirst().joined(separator: " "), limit: settings.limit ?? 20,
                                                offset: settings.offset ?? 0, sort: settings.sort)
        for user in page.users { output("\(user.username)\t\(user.displayName)\t\(user.id.rawValue)") }
    case "search":
        guard !(settings.hasAttachment && settings.noAttachment) else { throw UsageError(message: "give --has-attachment or --no-attachment, not both") }
        let filters = SearchFilters(from: settings.from, before: settings.beforeTime, after: settings.after, kind: settings.kind,
                                    hasAttachment: settings.hasAttachment ? true : settings.noAttachment ? false : nil,
                                    threadID: settings.thread.map(MessageID.init(rawValue:)))
        let results = try await client.searchMessages(words.joined(separator: " "), in: settings.conversation.map(ConversationID.init(rawValue:)),
                                                      filters: filters, limit: settings.limit ?? 20, cursor: settings.cursor)
        for message in results.messages {
            output("\(message.conversationID.rawValue)\t\(message.id.rawValue)\t\(message.sender.username)\t\(time(message.sentAt))\t\(text(of: message))")
        }
        if let next = results.nextCursor { output("next: \(next)") }
    case "conversations":
        var fields: [String: String] = [:]
        for pair in (settings.customData ?? "").split(separator: ",") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, !parts[0].isEmpty else { throw UsageError(message: "--custom-data takes NAME=VALUE pairs, comma-separated, not '\(pair)'") }
            fields[String(parts[0])] = String(parts[1])
        }
        let page = try await client.conversations(limit: settings.limit ?? 30, customData: fields, archived: settings.archived)
        for conversation in page.conversations {
            let name = (conversation.pinnedRank == nil ? "" : "📌 ") + (conversation.title ?? conversation.peer?.username ?? "(untitled)")
            let last = conversation.draft.map { "Draft: \($0.text)" } ?? conversation.lastMessage.map { "\($0.sender.username): \(text(of: $0))" } ?? ""
            let unread = "unread \(conversation.unreadCount)" + (conversation.markedUnread == true ? " marked" : "")
            output("\(conversation.id.rawValue)\t\(conversation.kind.rawValue)\t\(name)\t\(unread)\t\(last)")
        }
    case "send":
        if let to = settings.to {
            let names = to.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            let answer = try await client.send(try content(arguments, words: words), toUsernames: names)
            for name in answer.invalidUsernames { complain("no user named '\(name)'; left out") }
            guard let message = answer.message, let conversation = answer.conversation else {
                throw ParleyError.badResponse("the server answered without the message")
            }
            output("\(message.id.rawValue)\tseq \(message.seq)\t\(conversation.id.rawValue)")
        } else if let media = try outgoingMedia(arguments) {
            guard let conversation = words.first else { throw UsageError(message: "send needs a conversation id") }
            let caption = words.dropFirst().joined(separator: " ")
            let message = try await sendMedia(client, media, to: ConversationID(rawValue: conversation), caption: caption.isEmpty ? nil : caption)
            output("\(message.id.rawValue)\tseq \(message.seq)")
        } else if let sendAt = settings.sendAt {
            guard let conversation = words.first else { throw UsageError(message: "send --at needs a conversation id") }
            let planned = try await client.schedule(try content(arguments, words: words.dropFirst()), to: ConversationID(rawValue: conversation), at: sendAt)
            output("\(planned.id)\tscheduled for \(time(planned.sendAt))")
        } else {
            guard let conversation = words.first else { throw UsageError(message: "send needs a conversation id or --to usernames") }
            let clientID = try await client.send(try content(arguments, words: words.dropFirst()), to: ConversationID(rawValue: conversation),
                                                 previewLinks: !settings.noPreview)
            let message = try await deliverOutbox(client, waitingFor: clientID)
            output("\(message.id.rawValue)\tseq \(message.seq)")
        }
    case "download":
        guard let attachment = words.first else { throw UsageError(message: "download needs an attachment id (history --json shows them)") }
        let variant: MediaVariant = settings.thumbnail ? .thumbnail : .original
        let cached = try await client.download(attachment, variant: variant)
        var target = settings.output
        if target == nil {
            let name = try await client.mediaInfo(attachment).name.map { (($0 as NSString).lastPathComponent) } ?? attachment
            target = variant == .thumbnail ? name + ".thumbnail.jpg" : name
        }
        let destination = URL(fileURLWithPath: target ?? attachment)
        try? FileManager.default.removeItem(at: destination)
        try FileManager.default.copyItem(at: cached, to: destination)
        output(destination.path)
    case "history":
        guard let conversation = words.first else { throw UsageError(message: "history needs a conversation (an id, @username or a title)") }
        let page = try await client.history(of: try await resolveConversation(client, conversation), before: settings.before, limit: settings.limit ?? 50)
        if settings.json {
            output(try json(page))
        } else {
            for message in page.messages {
                output("\(message.seq)\t\(message.id.rawValue)\t\(message.sender.username)\t\(time(message.sentAt))\t\(text(of: message))")
            }
        }
    case "edit":
        guard words.count >= 3 else { throw UsageError(message: "edit <conversation> <message> <text…>") }
        let (conversation, message) = try await resolveMessage(client, words)
        let edited = try await client.edit(message, in: conversation, to: .text(words.dropFirst(2).joined(separator: " ")))
        output("\(edited.id.rawValue)\tedited")
    case "delete":
        guard words.count >= 2, let first = words.first else { throw UsageError(message: "delete <conversation> <message>…") }
        let conversation = try await resolveConversation(client, first)
        var messages: [MessageID] = []
        for word in words.dropFirst() { messages.append(try await resolveMessage(client, conversation, word)) }
        try await client.delete(messages, in: conversation)
        output("deleted \(words.count - 1)")
    case "react":
        guard words.count == 3 else { throw UsageError(message: "react <conversation> <message> <emoji> [--remove]") }
        let (conversation, message) = try await resolveMessage(client, words)
        let emoji = words[words.startIndex + 2]
        let changed = settings.remove ? try await client.unreact(emoji, from: message, in: conversation)
                                      : try await client.react(emoji, to: message, in: conversation)
        output(ChatScreen.reactionLine(changed) ?? "(no reactions)")
    case "poll":
        guard words.count >= 4, let conversation = words.first else {
            throw UsageError(message: "poll <conversation> <question> <option> <option>… [--multiple] [--anonymous] [--closes TIME]")
        }
        let poll = PollContent(question: words[words.startIndex + 1], options: Array(words.dropFirst(2)), multipleChoice: settings.multiple,
                               anonymous: settings.anonymous, closesAt: settings.closesAt)
        let clientID = try await client.send(.poll(poll), to: ConversationID(rawValue: conversation))
        let sent = try await deliverOutbox(client, waitingFor: clientID)
        output("\(sent.id.rawValue)\t\(pollLine(poll, sent))")
    case "vote":
        guard words.count >= 2 else { throw UsageError(message: "vote <conversation> <message> [N…]") }
        let choices = try words.dropFirst(2).map { word -> Int in
            guard let number = Int(word), number >= 1 else { throw UsageError(message: "vote takes option numbers from 1, not '\(word)'") }
            return number - 1
        }
        let (conversation, message) = try await resolveMessage(client, words)
        let voted = try await client.vote(choices, in: message, conversation: conversation)
        output(body(of: voted))
    case "close-poll":
        guard words.count == 2 else { throw UsageError(message: "close-poll <conversation> <message>") }
        let (conversation, message) = try await resolveMessage(client, words)
        let closed = try await client.closePoll(message, in: conversation)
        output(body(of: closed))
    case "reactions":
        guard words.count == 2 else { throw UsageError(message: "reactions <conversation> <message> [--emoji E]") }
        let (conversation, message) = try await resolveMessage(client, words)
        let page = try await client.reactions(on: message, in: conversation,
                                              emoji: settings.emoji, limit: min(settings.limit ?? 50, 100))
        for reaction in page.reactions {
            output("\(reaction.emoji)\t\(reaction.user.username)\t\(reaction.user.displayName)\t\(time(reaction.reactedAt))")
        }
        if page.hasMore { complain("more reactions than shown; raise --limit") }
    case "pin" where settings.order != nil:
        let ids = (settings.order ?? "").split(separator: ",").map { ConversationID(rawValue: $0.trimmingCharacters(in: .whitespaces)) }
        guard words.isEmpty, !ids.isEmpty else { throw UsageError(message: "pin --order <conversation,conversation,…>") }
        try await client.setPinnedConversations(ids)
        output("pinned, top first: " + ids.map(\.rawValue).joined(separator: " "))
    case "pin" where words.count == 1:
        guard let conversation = words.first else { throw UsageError(message: "pin <conversation> [--remove]") }
        let changed = settings.remove ? try await client.unpin(ConversationID(rawValue: conversation)) : try await client.pin(ConversationID(rawValue: conversation))
        output("\(changed.id.rawValue)\t\(changed.pinnedRank == nil ? "unpinned" : "pinned to the top of your list")")
    case "scheduled":
        if let id = settings.cancel {
            try await client.cancelScheduled(id)
            output("\(id)\tcancelled")
        } else {
            for planned in try await client.scheduledMessages(in: settings.conversation.map(ConversationID.init(rawValue:))) {
                let words: String = switch planned.message.content {
                case .text(let text), .markdown(let text): text
                default: planned.message.content.typeName
                }
                let status = planned.status == .failed ? "failed: \(planned.error ?? "?")" : planned.status.rawValue
                output("\(planned.id)\t\(planned.conversationID.rawValue)\t\(time(planned.sendAt))\t\(status)\t\(words)")
            }
        }
    case "draft":
        guard let conversation = words.first else { throw UsageError(message: "draft <conversation> [text…] [--clear]") }
        let id = ConversationID(rawValue: conversation)
        let thread = settings.thread.map(MessageID.init(rawValue:))
        let text = words.dropFirst().joined(separator: " ")
        if settings.clear || !text.isEmpty {
            let saved = try await client.saveDraft(settings.clear ? "" : text, in: id, thread: thread)
            output(saved.text.isEmpty ? "draft cleared" : "draft saved: \(saved.text)")
        } else if let draft = try await client.draft(in: id, thread: thread) {
            output(draft.text)
        } else {
            complain("no draft here")
        }
    case "archive", "mark-unread":
        guard words.count == 1, let conversation = words.first else { throw UsageError(message: "\(command) <conversation> [--remove]") }
        let id = ConversationID(rawValue: conversation)
        if command == "archive" {
            let changed = settings.remove ? try await client.unarchive(id) : try await client.archive(id)
            output("\(changed.id.rawValue)\t\(changed.archived == true ? "archived (back with the next message unless muted)" : "in your list")")
        } else {
            let changed = try await client.markUnread(id, !settings.remove)
            output("\(changed.id.rawValue)\t\(changed.markedUnread == true ? "marked unread" : "not marked")")
        }
    case "pin":
        guard words.count == 2 else { throw UsageError(message: "pin <conversation> <message> [--remove]") }
        let (conversation, target) = try await resolveMessage(client, words)
        let changed = settings.remove ? try await client.unpin(target, in: conversation) : try await client.pin(target, in: conversation)
        output("\(changed.id.rawValue)\t\(changed.pinnedAt == nil ? "unpinned" : "pinned")")
    case "pins":
        guard words.count == 1, let conversation = words.first else { throw UsageError(message: "pins <conversation>") }
        for message in try await client.pins(in: ConversationID(rawValue: conversation)) {
            output("\(message.seq)\t\(message.id.rawValue)\t\(message.sender.username)\t\(text(of: message))")
        }
    case "thread":
        guard words.count >= 2 else { throw UsageError(message: "thread <conversation> <message> [text…]") }
        let (id, root) = try await resolveMessage(client, words)
        let reply = words.dropFirst(2).joined(separator: " ")
        if reply.isEmpty {
            let info = try await client.thread(root, in: id)
            output("\(info.root.seq)\t\(info.root.id.rawValue)\t\(info.root.sender.username)\t\(time(info.root.sentAt))\t\(text(of: info.root))")
            let page = try await client.threadHistory(root, in: id, limit: settings.limit ?? 50)
            for message in page.messages {
                output("  \(message.seq)\t\(message.id.rawValue)\t\(message.sender.username)\t\(time(message.sentAt))\t\(text(of: message))")
            }
            if let last = page.messages.last { _ = try await client.markThreadRead(root, in: id, upTo: last.seq) }
        } else {
            let clientID = try await client.send(.text(reply), to: id, inThread: root, alsoInConversation: settings.also)
            let message = try await deliverOutbox(client, waitingFor: clientID)
            output("\(message.id.rawValue)\tseq \(message.seq)")
        }
    case "export":
        let destination = URL(fileURLWithPath: settings.output ?? "parley-export.ndjson")
        let saved = try await client.export(conversation: settings.conversation.map(ConversationID.init(rawValue:)), to: destination)
        output("\(destination.path)\t" + saved.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
    case "report":
        guard words.count == 3 else { throw UsageError(message: "report <conversation> <message> <reason>") }
        guard let reason = ReportReason(rawValue: words[words.startIndex + 2]) else {
            throw UsageError(message: "the reason is one of \(ReportReason.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        let (conversation, message) = try await resolveMessage(client, words)
        let report = try await client.report(message, in: conversation,
                                             reason: reason, note: settings.note)
        output("\(report.id)\treported")
    case "block":
        if settings.list {
            for user in try await client.blockedUsers() { output("\(user.username)\t\(user.displayName)\t\(user.id.rawValue)") }
            return
        }
        guard words.count == 1, let user = words.first else { throw UsageError(message: "block <user-id> [--remove] | block --list") }
        if settings.remove { try await client.unblock(UserID(rawValue: user)) } else { try await client.block(UserID(rawValue: user)) }
        output(settings.remove ? "unblocked" : "blocked")
    case "ban":
        guard words.count == 2, let conversation = words.first else { throw UsageError(message: "ban <conversation> <user-id> [--hours N] [--remove]") }
        let user = UserID(rawValue: words[words.startIndex + 1])
        if settings.remove {
            try await client.unban(user, from: ConversationID(rawValue: conversation))
            output("ban lifted")
        } else {
            let until = settings.hours.map { Date().addingTimeInterval(TimeInterval($0) * 3600) }
            let ban = try await client.ban(user, from: ConversationID(rawValue: conversation), until: until, reason: settings.note)
            output("banned \(ban.user.username) until \(ban.until.map(time) ?? "lifted")")
        }
    case "mentions":
        let page = try await client.mentions(limit: settings.limit ?? 50)
        for message in page.messages {
            output("\(message.conversationID.rawValue)\t\(message.id.rawValue)\t\(message.sender.username)\t\(time(message.sentAt))\t\(text(of: message))")
        }
    case "chat":
        guard let conversation = words.first else {
            throw UsageError(message: "chat needs a conversation: an id (parley conversations lists them), @username, or a title")
        }
        try await ChatScreen.run(client, conversation: try await resolveConversation(client, conversation))
    case "listen":
        try await listen(client, conversation: settings.conversation.map(ConversationID.init(rawValue:)), json: settings.json)
    case "push":
        switch words.first {
        case "register":
            guard let token = words.dropFirst().first, words.count == 2 else { throw UsageError(message: "push register <token> [--fcm] [--sandbox]") }
            let device: PushDevice
            if settings.fcm {
                device = try await client.registerForPush(fcmToken: token)
            } else {
                guard token.count % 2 == 0, let bytes = hexBytes(token) else {
                    throw UsageError(message: "an APNs token is hex digits (the app logs it as such); pass --fcm for an FCM token")
                }
                device = try await client.registerForPush(deviceToken: Data(bytes), environment: settings.sandbox ? .sandbox : .production)
            }
            output("\(device.id)\t\(device.platform.rawValue)\t\(device.environment.rawValue)")
        case "list":
            for device in try await client.pushDevices() {
                output("\(device.id)\t\(device.platform.rawValue)\t\(device.environment.rawValue)\t\(device.token)")
            }
        case "unregister":
            try await client.unregisterForPush()
            output("this session gets no more pushes")
        default:
            throw UsageError(message: "try: parley push register <token> | push list | push unregister")
        }
    case "mute", "unmute":
        guard let conversation = words.first, words.count == 1 else { throw UsageError(message: "\(command) <conversation>") }
        if command == "unmute" {
            try await client.unmute(ConversationID(rawValue: conversation))
            output("unmuted")
        } else {
            let until = settings.hours.map { Date().addingTimeInterval(TimeInterval($0) * 3600) }
            let muted = try await client.mute(ConversationID(rawValue: conversation), until: until)
            output(until == nil ? "muted until unmuted" : "muted until \(muted.mutedUntil.map(time) ?? "?")")
        }
    case "notify":
        guard words.count == 2, let conversation = words.first, let choice = words.last,
              choice == "default" || NotificationLevel(rawValue: choice) != nil else {
            throw UsageError(message: "notify <conversation> all|mentions|default")
        }
        let updated = try await client.setNotifications(NotificationLevel(rawValue: choice), for: ConversationID(rawValue: conversation))
        output("pushes here: \(updated.notifications == .all ? "every new message" : "mentions of you only")")
    default:
        throw UsageError(message: "unknown command '\(command)'")
    }
}

/// A conversation as a person names it: its id (`c_…`), `@maria` (the direct chat with her,
/// made when there is none yet), or a title or a direct chat's username from the list (any
/// case); a bare name that is neither is tried as a username.
func resolveConversation(_ client: ParleyClient, _ word: String) async throws -> ConversationID {
    if word.hasPrefix("c_") { return ConversationID(rawValue: word) }
    if word.hasPrefix("@") { return try await client.directConversation(with: String(word.dropFirst())).id }
    let wanted = word.lowercased()
    var cursor: String?
    repeat {
        let page = try await client.conversations(limit: 100, before: cursor)
        if let found = page.conversations.first(where: { $0.title?.lowercased() == wanted || ($0.kind == .direct && $0.peer?.username.lowercased() == wanted) }) {
            return found.id
        }
        cursor = page.nextCursor
    } while cursor != nil
    do {
        return try await client.directConversation(with: word).id
    } catch {
        throw UsageError(message: "no conversation called '\(word)' and no user by that name: give an id (parley conversations lists them), @username or a title")
    }
}

/// The conversation and message the first two words name: the conversation as
/// ``resolveConversation(_:_:)`` reads it, the message by its id (`m_…`) or by its number
/// (`#12`, its seq: the number `chat`, `history`, `pins` and `thread` show).
func resolveMessage(_ client: ParleyClient, _ words: ArraySlice<String>) async throws -> (ConversationID, MessageID) {
    guard let first = words.first, words.count >= 2 else { throw UsageError(message: "give a conversation and a message") }
    let conversation = try await resolveConversation(client, first)
    return (conversation, try await resolveMessage(client, conversation, words[words.startIndex + 1]))
}

/// A message by its id (`m_…`) or its number in `conversation` (`#12`).
func resolveMessage(_ client: ParleyClient, _ conversation: ConversationID, _ word: String) async throws -> MessageID {
    guard word.hasPrefix("#") else { return MessageID(rawValue: word) }
    guard let seq = Int64(word.dropFirst()), seq >= 1 else {
        throw UsageError(message: "a message is its id (m_…) or its number as chat and history show it, like #12; not '\(word)'")
    }
    let page = try await client.history(of: conversation, before: seq + 1, limit: 1)
    guard let message = page.messages.last, message.seq == seq else {
        throw NotFound(message: "there is no message #\(seq) in that conversation (parley history shows the numbers)")
    }
    return message.id
}

/// `--server` as a URL: a bare host and port (`127.0.0.1:8080`, `chat.example.com`) gets
/// `http://` (`https://` for port 443 and names without a port); anything else must be an
/// http(s) URL with a host.
func serverURL(_ text: String) throws -> String {
    var url = text.trimmingCharacters(in: .whitespaces)
    if !url.contains("://") {
        let hostAndPort = url.split(separator: "/", maxSplits: 1).first.map(String.init) ?? url
        let local = hostAndPort.hasPrefix("127.") || hostAndPort.hasPrefix("localhost") || hostAndPort.hasPrefix("[::1]")
        let hasPort = hostAndPort.range(of: #":\d+$"#, options: .regularExpression) != nil
        url = (hostAndPort.hasSuffix(":443") || (!hasPort && !local) ? "https://" : "http://") + url
    }
    guard let parsed = URL(string: url), let scheme = parsed.scheme, ["http", "https"].contains(scheme), parsed.host != nil else {
        throw UsageError(message: "--server must be the server's address, like http://127.0.0.1:8080 or https://chat.example.com, not '\(text)'")
    }
    return url.hasSuffix("/") ? String(url.dropLast()) : url
}

/// The bytes of an even-length hex string; nil if it is not one.
func hexBytes(_ text: String) -> [UInt8]? {
    var bytes: [UInt8] = []
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2)
        guard let byte = UInt8(text[index..<next], radix: 16) else { return nil }
        bytes.append(byte)
        index = next
    }
    return bytes
}

/// Connects, waits until the outbox (this send and any left from before) is delivered.
func deliverOutbox(_ client: ParleyClient, waitingFor clientID: String) async throws -> Message {
    guard await client.currentUser != nil else { throw ParleyError.notSignedIn }
    let states = await client.connectionStates()
    await client.connect()
    let outcome = await Result { try await firstOutcome(of: Task { try await client.waitUntilSent(clientID) }, states: states, seconds: 15) }
    await client.disconnect()
    return try outcome.get()
}

extension Result where Failure == any Error {
    /// The outcome of an async throwing body.
    init(_ body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}

/// Whichever comes first: the send's outcome, the server refusing the session, or `seconds`
/// without an answer (the message stays queued in the state file and goes with the next
/// command).
func firstOutcome(of sent: Task<Message, any Error>, states: AsyncStream<ParleyClient.ConnectionState>, seconds: Int) async throws -> Message {
    let result = await withTaskGroup(of: Result<Message, ParleyError>?.self) { group in
        group.addTask {
            do { return .success(try await sent.value) } catch let error as ParleyError { return .failure(error) } catch { return nil }
        }
        group.addTask {
            for await state in states where state == .signedOut { return .failure(.notSignedIn) }
            return nil
        }
        group.addTask {
            try? await Task.sleep(for: .seconds(seconds))
            return .failure(.unreachable("no answer within \(seconds) s; the message is queued and goes with the next command"))
        }
        var first: Result<Message, ParleyError>?
        while first == nil, let next = await group.next() { first = next }
        sent.cancel()
        group.cancelAll()
        return first
    }
    switch result {
    case .success(let message)?: return message
    case .failure(let error)?: throw error
    case nil: throw ParleyError.unreachable("the message is queued and goes with the next command")
    }
}

func listen(_ client: ParleyClient, conversation: ConversationID?, json asJSON: Bool) async throws {
    guard await client.currentUser != nil else { throw ParleyError.notSignedIn }
    let events = await client.events()
    let states = await client.connectionStates()
    await client.connect()
    Task {
        for await state in states {
            if state == .signedOut { complain("signed out by the server: run parley login"); exit(4) }
            if !asJSON { complain("\(state)") }
        }
    }
    for await event in events {
        switch event {
        case .event(let event):
            guard conversation == nil || event.conversationID == conversation else { continue }
            if asJSON {
                output(try json(event))
            } else if let message = event.message {
                let what = event.type == .messageCreated ? "" : " [\(event.type.rawValue)]"
                output("\(time(event.createdAt))\t\(event.conversationID.rawValue)\t\(message.sender.username): \(text(of: message))\(what)")
            } else {
                output("\(time(event.createdAt))\t\(event.conversationID.rawValue)\t\(event.type.rawValue) \(event.userID?.rawValue ?? "")")
            }
        case .typing(let where_, let user, let typing, _, let thread):
            guard conversation == nil || where_ == conversation else { continue }
            let threadJSON = thread.map { #","threadId":"\#($0.rawValue)""# } ?? ""
            output(asJSON ? #"{"conversationId":"\#(where_.rawValue)"\#(threadJSON),"type":"typing","typing":\#(typing),"userId":"\#(user.rawValue)"}"#
                          : "\(where_.rawValue)\t\(user.rawValue) \(typing ? "is typing…" : "stopped typing")\(thread.map { " in the thread under \($0.rawValue)" } ?? "")")
        case .presence(let presence):
            output(asJSON ? try json(presence) : "\(presence.userID.rawValue) is \(presence.status.rawValue)")
        case .blocks(let users):
            output(asJSON ? try json(ServerFrame.Blocks(userIDs: users)) : "(you block \(users.count) \(users.count == 1 ? "person" : "people") now)")
        case .resync(let position):
            output(asJSON ? #"{"position":\#(position),"type":"resync"}"# : "(missed too much: reload; continuing from \(position))")
        case .saveFailed(let error):
            complain("warning: \(error.description)")
        }
    }
}

do {
    try await run(Array(CommandLine.arguments.dropFirst()))
    exit(0)
} catch let error as UsageError {
    complain(error.message + "\nRun 'parley --help' for the commands.")
    exit(2)
} catch let error as ParleyError {
    complain(error.description)
    switch error {
    case .notSignedIn: exit(4)
    case .server(let refusal) where refusal.code == "unauthenticated": complain("run: parley login <username>"); exit(4)
    case .unreachable: exit(3)
    default: exit(1)
    }
} catch {
    complain("\(error)")
    exit(1)
}
