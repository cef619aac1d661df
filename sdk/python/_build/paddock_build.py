"""A PEP 517 build backend with the standard library only, so that
`pip install ./sdk/python` works without a package index (setuptools'
wheel building needs the `wheel` package, which an offline machine may not
have). It packs paddock/ into a pure-Python wheel; nothing is compiled."""
import base64
import hashlib
import os
import tarfile
import zipfile

NAME = "paddock"
VERSION = "0.1.0"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIST = f"{NAME}-{VERSION}"

METADATA = f"""Metadata-Version: 2.1
Name: {NAME}
Version: {VERSION}
Summary: Python SDK for the Paddock sandbox daemon
Requires-Python: >=3.9
"""
WHEEL = """Wheel-Version: 1.0
Generator: paddock_build
Root-Is-Purelib: true
Tag: py3-none-any
"""


def _package_files():
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, NAME)):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for f in sorted(filenames):
            if f.endswith((".py", ".pyi")) or f == "py.typed":
                full = os.path.join(dirpath, f)
                yield full, os.path.relpath(full, ROOT).replace(os.sep, "/")


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    d = os.path.join(metadata_directory, f"{DIST}.dist-info")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w") as f:
        f.write(METADATA)
    with open(os.path.join(d, "WHEEL"), "w") as f:
        f.write(WHEEL)
    return f"{DIST}.dist-info"


def _record_line(arc, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arc},sha256={digest},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = f"{DIST}-py3-none-any.whl"
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for full, arc in _package_files():
            with open(full, "rb") as f:
                data = f.read()
            z.writestr(arc, data)
            records.append(_record_line(arc, data))
        for fname, text in (("METADATA", METADATA), ("WHEEL", WHEEL)):
            arc = f"{DIST}.dist-info/{fname}"
            z.writestr(arc, text)
            records.append(_record_line(arc, text.encode()))
        records.append(f"{DIST}.dist-info/RECORD,,")
        z.writestr(f"{DIST}.dist-info/RECORD", "\n".join(records) + "\n")
    return name


def build_sdist(sdist_directory, config_settings=None):
    name = f"{DIST}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in ("pyproject.toml", "README.md", "_build/paddock_build.py"):
            t.add(os.path.join(ROOT, rel), f"{DIST}/{rel}")
        for full, arc in _package_files():
            t.add(full, f"{DIST}/{arc}")
        pkg = tarfile.TarInfo(f"{DIST}/PKG-INFO")
        pkg.size = len(METADATA.encode())
        import io
        t.addfile(pkg, io.BytesIO(METADATA.encode()))
    return name
