// The SDK's public types (Message, Sender, ConversationEvent, Limits, …) are declared in
// ParleyWire, which the server shares. An app imports one module: `import Parley` brings them
// all (docs/sdk.md; the snippets in README.md and docs/sdk.md are compiled against this by
// `make test`, scripts/snippets.sh).
@_exported public import ParleyWire
