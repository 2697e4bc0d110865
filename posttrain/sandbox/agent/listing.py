"""The workspace as C2 sees it: staging the request's files, listing /work, reading files out.

Never follows a symlink the program made: listings use lstat, reads walk the path one
component at a time with O_NOFOLLOW under a directory fd. Standard library only.
"""

import os
import stat

try:  # the built-in module: hashlib would load OpenSSL, a start-up cost every fresh execution pays
    from _sha256 import sha256
except ImportError:  # Python >= 3.12
    from hashlib import sha256


def write_files(req, payload):
    off = 0
    for rel, size in req["files"]:
        path = os.path.join("/work", rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(payload[off : off + size])
        off += size


def manifest(root="/work", cap=20000):
    out = {}
    stack = [""]
    while stack and len(out) < cap:
        prefix = stack.pop()
        try:
            entries = list(os.scandir(os.path.join(root, prefix) if prefix else root))
        except OSError:
            continue
        for e in entries:
            rel = prefix + e.name
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                stack.append(rel + "/")
            elif stat.S_ISLNK(st.st_mode):
                t = os.fsencode(os.readlink(e.path))
                out[rel] = [len(t), sha256(b"symlink:" + t).hexdigest()]
            elif stat.S_ISREG(st.st_mode):
                out[rel] = [st.st_size, hash_file(e.path)]
    return out


def hash_file(path):
    h = sha256()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def read_safely(rel, cap):
    """Read /work/rel without following any symlink on the way."""
    dfd = os.open("/work", os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        parts = rel.split("/")
        for part in parts[:-1]:
            nfd = os.open(part, os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dfd)
            os.close(dfd)
            dfd = nfd
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
    finally:
        os.close(dfd)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        return f.read(cap).decode("utf-8", errors="replace")
