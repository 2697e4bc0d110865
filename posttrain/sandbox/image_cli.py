"""What `posttrain sandbox image build|verify` do, as library calls (the CLI stays thin)."""

from __future__ import annotations

from pathlib import Path

from posttrain.errors import SandboxError


def is_host_layer_spec(path: Path) -> bool:
    """The older YAML spec (pip packages over the host's /usr) has no base, or `base: host`."""
    import yaml

    if path.suffix not in (".yaml", ".yml") or not path.is_file():
        return False
    try:
        spec = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError:
        return True  # let the host-layer loader name the YAML error
    return not isinstance(spec, dict) or spec.get("base", "host") == "host"


def build_any(spec: str, allow_unreproducible: bool = False, verify: bool = False) -> tuple[str, str]:
    path = Path(spec)
    if is_host_layer_spec(path):
        from posttrain.sandbox.image_build import build_image

        img = build_image(path)
        return img.digest, str(img.layer.parent if img.layer else "")
    from posttrain.sandbox.rootfs_build import build_rootfs

    root = build_rootfs(path, allow_unreproducible, verify)
    return root.digest, str(root.manifest.parent)


def verify_image(digest: str) -> tuple[bool, str]:
    from posttrain.sandbox.images import images_dir, load_rootfs

    hexd = digest.removeprefix("sha256:")
    found = [p for p in images_dir().glob(f"{hexd}*") if (p / "image.json").is_file()]
    if len(found) != 1:
        raise SandboxError(f"image {digest!r}: {'no' if not found else 'more than one'} built image matches")
    img = load_rootfs(found[0].name, full_check=True)
    if img is None:
        return False, f"image sha256:{found[0].name} is corrupt: a layer's content differs from its digest (removed; build again)"
    return True, f"{img.digest} ok ({len(img.lowers)} layers)"
