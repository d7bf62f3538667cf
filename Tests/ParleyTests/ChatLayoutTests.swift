import ParleyTerminalUI
import Testing

/// The chat screen as data: bubbles, wrapping, scrolling, the status marks, and key decoding.
struct ChatLayoutTests {
    let bubbles = [
        ChatLayout.Bubble(number: 1, mine: false, sender: "Bob", time: "09:00", text: "hi Ana"),
        ChatLayout.Bubble(number: 2, mine: false, sender: "Bob", time: "09:01", text: "dinner at 8?", edited: true, reactions: "👍 2", pinned: true),
        ChatLayout.Bubble(number: 3, mine: true, sender: "Ana", time: "09:02", text: "yes!", status: .read, reactions: "🎉 1"),
        ChatLayout.Bubble(number: 4, mine: true, sender: "Ana", time: "09:03", text: "oops", deleted: true, status: .delivered),
        ChatLayout.Bubble(number: 5, mine: true, sender: "Ana", time: "09:04", text: "on my way", status: .sending),
    ]

    @Test func othersOnTheLeftWithTheirNameOnceMineOnTheRightWithNumberTimeAndStatus() {
        let lines = ChatLayout(width: 40, height: 20).lines(for: bubbles)
        #expect(lines == [
            "Bob",
            "▏ hi Ana",
            "  #1 09:00",
            "▏ 📌 dinner at 8? (edited)",
            "  👍 2",
            "  #2 09:01",
            "                                  yes! ▕",
            "                                   🎉 1  ",
            "                      #3 09:02 ✓✓ read  ",
            "                             (deleted) ▕",
            "                           #4 09:03 ✓✓  ",
            "                             on my way ▕",
            "                            #5 09:04 …  ",
        ])
        #expect(lines.allSatisfy { $0.count <= 40 })
        #expect(lines.filter { $0.hasSuffix("▕") || $0.hasSuffix("  ") }.allSatisfy { $0.count == 40 }, "mine are flush right")
    }

    @Test func longTextWrapsInsideSeventyPercentOfTheWidth() {
        let long = ChatLayout.Bubble(number: 1, mine: false, sender: "Bob", time: "10:00",
                                     text: "the quick brown fox jumps over the lazy dog and keeps running far away")
        let lines = ChatLayout(width: 30, height: 10).lines(for: [long])
        #expect(lines.dropFirst().dropLast().allSatisfy { $0.count <= 21 + 2 })
        #expect(lines.dropFirst().dropLast().map { $0.dropFirst(2) }.joined(separator: " ")
                == "the quick brown fox jumps over the lazy dog and keeps running far away")
        #expect(ChatLayout.wrap(String(repeating: "x", count: 25), width: 10) == ["xxxxxxxxxx", "xxxxxxxxxx", "xxxxx"])
    }

    @Test func theScreenHasTheTitleNewestAtTheBottomTypingRuleAndInput() {
        let layout = ChatLayout(width: 40, height: 8)
        let screen = layout.screen(title: "Bob  [online]", bubbles: bubbles, scroll: 0, typing: "Bob is typing…", input: "hel")
        #expect(screen.count == 8)
        #expect(screen[0] == "Bob  [online]")
        #expect(screen[1...3] == ["                             (deleted) ▕", "                           #4 09:03 ✓✓  ",
                                  "                             on my way ▕"])
        #expect(screen[4] == "                            #5 09:04 …  ")
        #expect(screen[5] == "Bob is typing…")
        #expect(screen[6] == String(repeating: "─", count: 40))
        #expect(screen[7] == "> hel")
        // Scrolling up shows older lines and says so; it stops at the top.
        let up = layout.screen(title: "Bob", bubbles: bubbles, scroll: 100, typing: nil, input: "")
        #expect(up[0].hasPrefix("Bob  (↑ 9 lines"))
        #expect(up[1] == "Bob" && up[2] == "▏ hi Ana")
        #expect(layout.maxScroll(for: bubbles) == 9, "the reactions lines count too")
        // A notice never hides who is typing: typing first, the notice after it.
        let both = layout.screen(title: "Bob", bubbles: bubbles, scroll: 0, typing: "Bob is typing…", input: "", notice: "pinned #2")
        #expect(both[5] == "Bob is typing…  ·  pinned #2")
        #expect(layout.screen(title: "Bob", bubbles: bubbles, scroll: 0, typing: nil, input: "", notice: "pinned #2")[5] == "pinned #2")
    }

    @Test func keysFromTerminalBytes() {
        var decoder = KeyDecoder()
        #expect(decoder.feed(Array("hé".utf8) + [0x0D, 0x7F]) == [.character("h"), .character("é"), .enter, .backspace])
        #expect(decoder.feed([0x1B, 0x5B]) == [], "an escape sequence waits for the rest")
        #expect(decoder.feed([0x35, 0x7E, 0x1B, 0x5B, 0x36, 0x7E, 0x1B, 0x5B, 0x41, 0x03]) == [.pageUp, .pageDown, .up, .interrupt])
        #expect(decoder.feed(Array("👍".utf8).prefix(2).map { $0 }) == [])
        #expect(decoder.feed(Array(Array("👍".utf8).suffix(2))) == [.character("👍")])
    }

    @Test func markdownShowsItsWordsWithoutTheMarkersAndLinksWithTheirURL() {
        #expect(ChatLayout.plainMarkdown("**bold** and _italic_ and *also* and ~~gone~~ and `code`") == "bold and italic and also and gone and code")
        #expect(ChatLayout.plainMarkdown("see [the docs](https://example.org/a) now") == "see the docs (https://example.org/a) now")
        #expect(ChatLayout.plainMarkdown("```swift\nlet x = 1\n```") == "let x = 1\n")
        #expect(ChatLayout.plainMarkdown("snake_case_name and 2*3*4 stay") == "snake_case_name and 2*3*4 stay")
        #expect(ChatLayout.plainMarkdown("[not a link](javascript:alert(1))") == "[not a link](javascript:alert(1))")
    }
}
