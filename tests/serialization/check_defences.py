"""Each defence of the checkpoint loader shown to matter: remove it, and a test in this folder fails.

For every entry, a copy of the package with that one check replaced is put first on ``PYTHONPATH`` and the
named test files run against it; the script prints the first failing test, and exits non-zero if a removed
defence went unnoticed. Run from the repository root (a few minutes):
``.venv/bin/python -m tests.serialization.check_defences [name ...]``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "reference" / "modulecraft"

DEFENCES = {  # name: (file in serialization/, the test files that must fail, the check, what replaces it)
    'allow list': (
        'torch_zip.py', 'test_hostile_checkpoints.py',
        '            return _ALLOWED_GLOBALS[module, name]\n',
        '            return _ALLOWED_GLOBALS.get((module, name)) or super().find_class(module, name)\n'),
    'opcode prescan': (
        'torch_zip.py', 'test_hostile_checkpoints.py',
        '        _check_opcodes(data)\n',
        ''),
    'memo order': (
        'torch_zip.py', 'test_hostile_checkpoints.py',
        '                if argument > puts:',
        '                if False:'),
    'pickle size limit': (
        'torch_zip.py', 'test_hostile_checkpoints.py',
        '        if limit is not None and info.file_size > limit:',
        '        if False:'),
    'npy declared sizes': (
        'npz_format.py', 'test_npz_format.py',
        '        _check_declared_sizes(file)\n',
        ''),
    'view bounds': (
        'torch_zip.py', 'test_hostile_checkpoints.py',
        '    if storage_offset > storage.numel or (',
        '    if False and ('),
    'storage size': (
        'torch_zip.py', 'test_hostile_checkpoints.py',
        '        if expected_size is not None and info.file_size != expected_size:',
        '        if False:'),
    'compressed': (
        'torch_zip.py', 'test_hostile_checkpoints.py',
        '        if info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size:',
        '        if False:'),
    'declared > file': (
        'torch_zip.py', 'test_hostile_checkpoints.py',
        '        if info.file_size > self.file_size:',
        '        if False:'),
    'duplicates': (
        'torch_zip.py', 'test_hostile_checkpoints.py',
        '        if len(set(names)) != len(names):',
        '        if False:'),
    'metadata check': (
        'torch_zip.py', 'test_hostile_checkpoints.py',
        '            result._metadata = _checked_metadata(metadata)',
        '            result._metadata = metadata'),
    'metadata kept': (
        'torch_zip.py', 'test_torch_checkpoints.py',
        '            result._metadata = _checked_metadata(metadata)',
        '            pass'),
    'dict rebuilt': (
        'torch_zip.py', 'test_hostile_checkpoints.py',
        '        result = type(obj)() if type(obj) in (dict, OrderedDict) else None',
        '        result = obj'),
    'unpickle errors wrapped': (
        'torch_zip.py', 'test_hostile_checkpoints.py test_fuzzed_checkpoints.py',
        '        except Exception as error:  # only allowed',
        '        except ZeroDivisionError as error:  # only allowed'),
    'zip errors wrapped': (
        'torch_zip.py', 'test_hostile_checkpoints.py test_fuzzed_checkpoints.py',
        '    except (zipfile.BadZipFile, OSError,',
        '    except (OSError,'),
    'shared storage': (
        'torch_zip.py', 'test_torch_checkpoints.py',
        '            storage[obj.offset:], shape',
        '            storage.copy()[obj.offset:], shape'),
    'byte order': (
        'torch_zip.py', 'test_torch_checkpoints.py',
        '    order = "<" if byteorder == "little" else ">"',
        '    order = "<"'),
    'counts non-negative': (
        'torch_zip.py', 'test_hostile_checkpoints.py',
        'value >= 0\n',
        'True\n'),
    'latin1 only': (
        'torch_zip.py', 'test_hostile_checkpoints.py test_torch_checkpoints.py',
        'encoding == "latin1")',
        'True)'),
    'safetensors errors wrapped': (
        'safetensors_format.py', 'test_safetensors_format.py test_fuzzed_checkpoints.py',
        '    except (safetensors.SafetensorError, ValueError, TypeError, AttributeError, struct.error) as error:',
        '    except (ZeroDivisionError) as error:'),
    'header errors wrapped': (
        'header.py', 'test_fuzzed_checkpoints.py test_safetensors_format.py',
        '    except (ValueError, TypeError, KeyError, AttributeError) as error:',
        '    except ZeroDivisionError as error:'),
    'safetensors 0-d/contiguous': (
        'safetensors_format.py', 'test_safetensors_format.py',
        'array.astype(array.dtype.newbyteorder("<"), order="C", copy=False)',
        'np.ascontiguousarray(array)'),
}


def survives(name: str, file: str, tests: str, check: str, replacement: str, scratch: Path) -> bool:
    """Whether every named test still passes with ``check`` replaced (printing what happened)."""
    copy = scratch / name.replace(" ", "_") / "modulecraft"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / "serialization" / file
    text = target.read_text()
    if check not in text:
        raise SystemExit(f"{name}: the check {check!r} is no longer in {file}; update this script")
    target.write_text(text.replace(check, replacement))
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
               *[f"tests/serialization/{test}" for test in tests.split()]]
    env = {**os.environ, "PYTHONPATH": str(copy.parent)}
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAILED")]
    print(f"{name:28s} {'SURVIVED: no test noticed' if result.returncode == 0 else failed[:1]}", flush=True)
    return result.returncode == 0


def main(names: list[str]) -> int:
    with tempfile.TemporaryDirectory() as scratch:
        survivors = [name for name, entry in DEFENCES.items()
                     if (not names or name in names) and survives(name, *entry, Path(scratch))]
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
