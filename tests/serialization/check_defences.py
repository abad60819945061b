"""Each defence of the checkpoint loader shown to matter: remove it, and a test in this folder fails.

For every entry, a copy of the package with that one check replaced is put first on ``PYTHONPATH`` and the
named test files run against it; the script prints the first failing test, and exits non-zero if a removed
defence went unnoticed. Run from the repository root (half an hour for all 55 on a loaded machine; name some):
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
        'torch_pickle.py', 'test_hostile_checkpoints.py',
        '            found = _ALLOWED_GLOBALS[module, name]\n',
        '            found = _ALLOWED_GLOBALS.get((module, name)) or super().find_class(module, name)\n'),
    'BUILD-proof callables': (
        'torch_pickle.py', 'test_resource_bounds.py',
        '            return _Allowed(self._counted(found.function))',
        '            return found.function'),
    'opcode prescan': (
        'torch_zip.py', 'test_hostile_checkpoints.py',
        '        check_opcodes(data)\n',
        ''),
    'memo order': (
        'pickle_scan.py', 'test_hostile_checkpoints.py',
        'if index > len(memo):',
        'if False:'),
    'object memory limit': (
        'pickle_scan.py', 'test_resource_bounds.py test_size_bounds.py',
        '    if spent > allowed:',
        '    if False:'),
    'object memory of calls': (
        'pickle_scan.py', 'test_size_bounds.py',
        'spent += cost + _ITEM * len(items)',
        'spent += 0'),
    'opcodes limit': (
        'pickle_scan.py', 'test_size_bounds.py',
        '                if opcodes > opcodes_allowed:',
        '                if False:'),
    'hashed nodes': (
        'pickle_scan.py', 'test_size_bounds.py',
        '    if hashed > limits.HASHED_NODES:',
        '    if False:'),
    'chosen hashes': (
        'pickle_scan.py', 'test_size_bounds.py',
        '    if chosen > limits.CHOSEN_HASH_NODES:',
        '    if False:'),
    'tensor limit': (
        'torch_pickle.py', 'test_resource_bounds.py',
        '            if self.tensors > limits.TENSORS:',
        '            if False:'),
    'tuple nesting': (
        'pickle_scan.py', 'test_resource_bounds.py',
        '                if value.depth > limits.NESTING:',
        '                if False:'),
    'container nesting': (
        'torch_pickle.py', 'test_resource_bounds.py',
        '\n        if depth > limits.NESTING:',
        '\n        if False:'),
    'ints bounded before arithmetic': (
        'torch_pickle.py', 'test_resource_bounds.py',
        '    return type(value) is int and 0 <= value < limits.INT64',
        '    return type(value) is int and 0 <= value'),
    'counts non-negative': (
        'torch_pickle.py', 'test_hostile_checkpoints.py',
        '    return type(value) is int and 0 <= value < limits.INT64',
        '    return type(value) is int and value < limits.INT64'),
    'pickle size limit': (
        'torch_zip.py', 'test_hostile_checkpoints.py',
        '        if pickle_member.size > _PICKLE_LIMIT:',
        '        if False:'),
    'npy declared sizes': (
        'npz_format.py', 'test_npz_format.py',
        '    if len(shape) > limits.DIMENSIONS or math.prod(shape) * dtype.itemsize != member.size - data_start:',
        '    if False:'),
    'npy objects': (
        'npz_format.py', 'test_npz_format.py',
        '    if dtype.hasobject:',
        '    if False:'),
    'npz CRC': (
        'npz_format.py', 'test_fuzzed_checkpoints.py',
        '            if zlib.crc32(data, zlib.crc32(head)) != member.crc:',
        '            if False:'),
    'member count': (
        'zip_members.py', 'test_size_bounds.py',
        '    if records > limits.MEMBERS:',
        '    if False:'),
    'view bounds': (
        'torch_pickle.py', 'test_hostile_checkpoints.py',
        '    if storage_offset > numel or (',
        '    if False and ('),
    'storage size': (
        'torch_zip.py', 'test_hostile_checkpoints.py',
        '            if member.size != ref.nbytes:',
        '            if False:'),
    'compressed': (
        'zip_members.py', 'test_hostile_checkpoints.py test_resource_bounds.py',
        '            if info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size:',
        '            if False:'),
    'declared > file': (
        'zip_members.py', 'test_hostile_checkpoints.py test_resource_bounds.py',
        '            if start + info.file_size > file_size:',
        '            if False:'),
    'overlapping members': (
        'zip_members.py', 'test_resource_bounds.py',
        '            if begin < end:',
        '            if False:'),
    'duplicates': (
        'zip_members.py', 'test_hostile_checkpoints.py',
        '            if info.filename in self.members:',
        '            if False:'),
    'small members CRC': (
        'zip_members.py', 'test_hostile_checkpoints.py',
        '        if member.crc and zlib.crc32(data) != member.crc:',
        '        if False:'),
    'CRC-less files': (
        'zip_members.py', 'test_torch_checkpoints.py',
        '        if member.crc and zlib.crc32(data) != member.crc:',
        '        if zlib.crc32(data) != member.crc:'),
    'metadata check': (
        'torch_pickle.py', 'test_hostile_checkpoints.py',
        '                result._metadata = _checked_metadata(metadata)',
        '                result._metadata = metadata'),
    'metadata kept': (
        'torch_pickle.py', 'test_torch_checkpoints.py',
        '                result._metadata = _checked_metadata(metadata)',
        '                pass'),
    'dict rebuilt': (
        'torch_pickle.py', 'test_hostile_checkpoints.py',
        '            result = type(obj)()',
        '            result = obj'),
    'unpickle errors wrapped': (
        'torch_zip.py', 'test_hostile_checkpoints.py test_fuzzed_checkpoints.py',
        '        except Exception as error:  # only allowed',
        '        except ZeroDivisionError as error:  # only allowed'),
    'local fields agree': (
        'zip_members.py', 'test_hostile_checkpoints.py test_resource_bounds.py',
        '            if not _local_fields_agree(file.read(name_length + extra_length), name_length, info.orig_filename):',
        '            if False:'),
    'local header checked': (
        'zip_members.py', 'test_hostile_checkpoints.py',
        '            if len(header) != _LOCAL_HEADER.size or not header.startswith(_LOCAL_SIGNATURE):',
        '            if False:'),
    'memory errors wrapped': (
        '__init__.py', 'test_resource_bounds.py',
        '    except MemoryError:',
        '    except ZeroDivisionError:'),
    'shared storage': (
        'torch_zip.py', 'test_torch_checkpoints.py test_size_bounds.py',
        'view = np.ndarray(spec.size, stored, buffer=raw,',
        'view = np.ndarray(spec.size, stored, buffer=raw.copy(),'),
    'widened per tensor': (
        'torch_zip.py', 'test_size_bounds.py',
        '        return kind.load(view.astype(kind.raw) if swap else view)',
        '        kind.load(raw.view(stored))  # the whole storage, as before\n'
        '        return kind.load(view.astype(kind.raw) if swap else view)'),
    'converted budget': (
        'torch_zip.py', 'test_size_bounds.py',
        '        if self.budget < 0:',
        '        if False:'),
    'byte order': (
        'torch_zip.py', 'test_torch_checkpoints.py',
        '        swap = self.big_endian and kind.raw.itemsize > 1',
        '        swap = False'),
    'latin1 only': (
        'torch_pickle.py', 'test_hostile_checkpoints.py test_torch_checkpoints.py',
        'encoding == "latin1")',
        'True)'),
    'safetensors errors wrapped': (
        'safetensors_format.py', 'test_safetensors_format.py test_fuzzed_checkpoints.py test_resource_bounds.py',
        '    except (ValueError, TypeError, RecursionError, struct.error, OSError) as error:',
        '    except (ZeroDivisionError) as error:'),
    'safetensors header size': (
        'safetensors_format.py', 'test_resource_bounds.py',
        '        if header_size > min(limits.HEADER_BYTES, file_size - 8):',
        '        if False:'),
    'safetensors dtype known': (
        'safetensors_format.py', 'test_resource_bounds.py',
        '    if kind is None:',
        '    if False:'),
    'safetensors shapes bounded': (
        'safetensors_format.py', 'test_resource_bounds.py test_safetensors_format.py',
        '    if not (type(shape) is list and len(shape) <= limits.DIMENSIONS and all(map(_is_count, shape))',
        '    if not (type(shape) is list'),
    'safetensors coverage': (
        'safetensors_format.py', 'test_resource_bounds.py test_safetensors_format.py',
        '            covered = end if begin == covered else -1',
        '            covered = end'),
    'header errors wrapped': (
        'header.py', 'test_fuzzed_checkpoints.py test_safetensors_format.py test_resource_bounds.py',
        '    except (ValueError, TypeError, KeyError, AttributeError, RecursionError, OverflowError) as error:',
        '    except ZeroDivisionError as error:'),
    'header overflow wrapped': (
        'header.py', 'test_size_bounds.py',
        'RecursionError, OverflowError) as error:',
        'RecursionError) as error:'),
    'header nesting': (
        'header.py', 'test_resource_bounds.py',
        '\n    if depth > limits.NESTING:\n        raise CheckpointError',
        '\n    if False:\n        raise CheckpointError'),
    'header nodes': (
        'header.py', 'test_size_bounds.py',
        '    if nodes > allowed:',
        '    if False:'),
    'header nodes ceiling': (
        'header.py', 'test_size_bounds.py',
        'allowed = min(limits.HEADER_NODES_MOST, ',
        'allowed = min(2**62, '),
    'object memory ceiling': (
        'pickle_scan.py', 'test_size_bounds.py',
        'allowed = min(limits.OBJECT_BYTES_MOST, ',
        'allowed = min(2**62, '),
    'header chosen hashes': (
        'header.py', 'test_size_bounds.py',
        '            if self.chosen > limits.CHOSEN_HASH_NODES:',
        '            if False:'),
    'header dtypes': (
        'header.py', 'test_size_bounds.py',
        '    if text not in _DTYPES:',
        '    if False:'),
    'safetensors tensors': (
        'safetensors_format.py', 'test_size_bounds.py',
        '        if len(header) > limits.TENSORS:',
        '        if False:'),
    'flattened names unique': (
        'header.py', 'test_training_checkpoints.py',
        '        if name in arrays:',
        '        if False:'),
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
