"""Test media made on the fly: photos with EXIF orientation and GPS (Pillow), and the first
bytes of video, audio and document formats."""
import io
import struct
import zlib

from PIL import Image

GPS = {1: "N", 2: (52.0, 31.0, 12.0), 3: "E", 4: (13.0, 24.0, 36.0)}


def jpeg(width=640, height=480, orientation=1, gps=True, color=(200, 40, 40), quality=90):
    """A JPEG with a gradient, EXIF orientation and (by default) a GPS position."""
    image = Image.new("RGB", (width, height), color)
    pixels = image.load()
    for x in range(0, width, 7):
        for y in range(0, height // 2, 3):
            pixels[x, y] = (x % 256, y % 256, 120)
    exif = Image.Exif()
    exif[0x0112] = orientation
    exif[0x010F] = "Parley Test Camera"
    if gps:
        exif[0x8825] = GPS
    out = io.BytesIO()
    image.save(out, "JPEG", exif=exif.tobytes(), quality=quality)
    return out.getvalue()


def png(width=300, height=200, text="secret location", alpha=False):
    """A PNG with a tEXt chunk (which the server must drop)."""
    from PIL import PngImagePlugin
    image = Image.new("RGBA" if alpha else "RGB", (width, height), (10, 120, 200, 128) if alpha else (10, 120, 200))
    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", text)
    out = io.BytesIO()
    image.save(out, "PNG", pnginfo=info)
    return out.getvalue()


def png_lying_chunk(claimed=0x4000_0017):
    """A real PNG with a tEXt chunk after the header whose length field claims about 1 GiB:
    libpng allocated that much for it before reading (found by fuzz-media)."""
    good = png()
    text = b"Comment\x00secret"
    lying = struct.pack(">I", claimed) + b"tEXt" + text + struct.pack(">I", zlib.crc32(b"tEXt" + text) & 0xFFFFFFFF)
    return good[:33] + lying + good[33:]


def png_bomb(width=100_000, height=100_000):
    """A few hundred bytes that claim to be a huge PNG: a valid header, a tiny compressed body."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00" * 1024)) + chunk(b"IEND", b"")


def exif_of(data):
    """(orientation, has GPS, size) of an image's bytes."""
    image = Image.open(io.BytesIO(data))
    exif = image.getexif()
    return exif.get(0x0112), bool(exif.get_ifd(0x8825)), image.size


def mp4(size=4096):
    """An ISO BMFF file's first box (ftyp isom) and filler: enough to be recognised as MP4."""
    ftyp = struct.pack(">I", 24) + b"ftypisom" + struct.pack(">I", 512) + b"isomiso2"
    mdat = struct.pack(">I", size) + b"mdat" + bytes(size - 8)
    return ftyp + mdat


def mp3(size=2048):
    """An ID3v2 header and filler."""
    return b"ID3\x04\x00\x00\x00\x00\x00\x00" + bytes(size)


def pdf(size=1024):
    """A PDF header and filler."""
    return b"%PDF-1.7\n" + b"%" * size + b"\n%%EOF\n"
