#if canImport(Glibc)
import Glibc
#endif

/// Reads a file and runs one fuzz input through `target`.
func replay(_ path: String, _ target: (UnsafePointer<UInt8>, Int) -> CInt) {
    guard let file = fopen(path, "rb") else {
        print("cannot open \(path)")
        exit(2)
    }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = fread(&chunk, 1, chunk.count, file)
        if count <= 0 { break }
        bytes += chunk[0..<count]
    }
    if bytes.isEmpty { bytes = [0] }
    _ = bytes.withUnsafeBufferPointer { buffer -> CInt in
        guard let base = buffer.baseAddress else { return 0 }
        return target(base, buffer.count)
    }
}
