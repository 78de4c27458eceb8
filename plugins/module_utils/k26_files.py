# -*- coding: utf-8 -*-
"""Files the modules keep between runs (the model's manifest on a host, the start-up records on the controller),
written so that a reader never sees half of one."""

from __future__ import annotations

import os
import tempfile


def write_atomically(path, text, mode=0o644, dir_mode=0o755):
    """Write ``text`` to ``path`` through a temporary file in the same directory (created with ``dir_mode``),
    flushed to disk, given ``mode`` and renamed over ``path``; the temporary file is removed on any failure."""
    directory = os.path.dirname(path) or '.'
    os.makedirs(directory, mode=dir_mode, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix='.%s.' % os.path.basename(path))
    try:
        with os.fdopen(handle, 'w', encoding='utf-8') as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
