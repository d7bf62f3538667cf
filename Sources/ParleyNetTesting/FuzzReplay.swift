#if canImport(Glibc)
import Glibc
#endif

/// The `main` of a fuzz target built without libFuzzer: runs each file given on the command
/// line through `target` once, so saved crash inputs and seeds stay tests forever.
///
/// - Parameters:
///   - name: the executable's name, for the usage line.
///   - target: the `LLVMFuzzerTestOneInput` function.
package func replayFuzzInputs(name: String, arguments: [String], target: (UnsafePointer<UInt8>, Int) -> CInt) {
    guard !arguments.isEmpty else {
        print("usage: \(name) FILE... (replays inputs; scripts/fuzz.sh builds the fuzzing version)")
        return
    }
    for path in arguments {
        guard let file = fopen(path, "rb") else {
            print("\(name): cannot open \(path)")
            exit(2)
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            if count <= 0 { break }
            bytes += chunk[0..<count]
        }
        fclose(file)
        if bytes.isEmpty { bytes = [0] }
        _ = bytes.withUnsafeBufferPointer { buffer -> CInt in
            guard let base = buffer.baseAddress else { return 0 }
            return target(base, buffer.count)
        }
    }
    print("\(name): replayed \(arguments.count) input(s), no failure")
}
