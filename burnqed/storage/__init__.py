"""Artifact storage (docs/architecture.md): every artifact has a URI under one run root, `file://` (the default,
relative paths allowed) or `s3://bucket/prefix` through s3fs, read and written through a `Store`.

    store = Store.from_config(cfg.storage)       # once, at the command layer
    with store.staged_output(join(root, "iter_0/sft"), "sft") as folder:
        train(into=folder)                       # published whole, `_SUCCESS.json` last
    store.is_done(join(root, "iter_0/sft"))      # True: re-runs skip the stage

`store` (the Store), `paths` (URIs), `localfs` and `s3` (the backends), `markers` (completion markers and whose
output a folder is), `faults` (storage faults as one-line errors), `home` (home and cache folders),
`place_lease` (one owner per output place).
"""

from burnqed.storage.faults import storage_error, storage_fault
from burnqed.storage.home import default_cache_dir, expand_home, no_home_message, user_home
from burnqed.storage.localfs import publishable, read_json_model, write_text_atomic
from burnqed.storage.markers import MARKER_NAME, PUBLISHING_NAME, StageMarker
from burnqed.storage.paths import Filesystem, hub_shaped, is_remote, join, local_path, normalize
from burnqed.storage.s3 import abort_uploads, put_bytes
from burnqed.storage.store import Store

__all__ = [
    "MARKER_NAME", "PUBLISHING_NAME", "Filesystem", "StageMarker", "Store", "abort_uploads", "default_cache_dir",
    "expand_home", "hub_shaped", "is_remote", "join", "local_path", "no_home_message", "normalize", "publishable",
    "put_bytes",
    "read_json_model", "storage_error", "storage_fault", "user_home", "write_text_atomic",
]
