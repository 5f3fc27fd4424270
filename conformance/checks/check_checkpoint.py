"""Checkpoint: construction, copies out, metadata, pickling (clauses `checkpoint.*`).

Every example works in a fresh temporary folder; the temporary directories that
`to_directory()` makes on its own are removed after each example.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import pickle
import shutil
import tempfile

import pyarrow.fs
from hypothesis import given
from hypothesis import strategies as st

from conformance import assertions
from conformance import strategies as s
from conformance.catalogue import clause

_SEGMENTS = st.lists(st.text("abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=8),
                     min_size=1, max_size=4)


# Making and removing folders on a disk-backed /tmp dominates these checks' run time;
# a memory filesystem, where there is one, makes them about forty times cheaper.
_SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


@contextlib.contextmanager
def _workspace():
    with tempfile.TemporaryDirectory(prefix="trainspec-ckpt-", dir=_SCRATCH) as root:
        yield root


def _source(root: str, tree: dict) -> str:
    src = os.path.join(root, "src")
    os.mkdir(src)
    s.write_tree(src, tree)
    return src


def _same_tree(seen_root: str, expected: dict, what: str, setting: str) -> None:
    __tracebackhide__ = True
    seen = s.read_tree(seen_root)
    if seen != expected:
        raise AssertionError(f"{what}: tree={s.describe_tree(seen)!r}, expected "
                             f"{s.describe_tree(expected)!r} [{setting}]")


def _is_local(fs) -> bool:
    return isinstance(fs, pyarrow.fs.LocalFileSystem)


@clause("checkpoint.from-directory")
@given(segments=_SEGMENTS, absolute=st.booleans(), trailing_slash=st.booleans(),
       as_path=st.booleans())
def check_from_directory_keeps_path(impl, segments, absolute, trailing_slash, as_path):
    # Paths under a fresh name that does not exist: there is no existence check.
    text = ("/trainspec-missing/" if absolute else "") + "/".join(segments)
    text += "/" if trailing_slash else ""
    given_path = pathlib.Path(text) if as_path else text
    ckpt = impl.train.Checkpoint.from_directory(given_path)
    setting = f"Checkpoint.from_directory({given_path!r})"
    assertions.equal(ckpt.path, str(given_path), "path", setting)
    assertions.equal(_is_local(ckpt.filesystem), True,
                     f"filesystem={ckpt.filesystem!r} is a pyarrow LocalFileSystem", setting)


@clause("checkpoint.from-directory")
@given(segments=_SEGMENTS, form=st.sampled_from(["str", "path", "file-uri"]))
def check_constructor_resolves_filesystem(impl, segments, form):
    absolute = "/trainspec-missing/" + "/".join(segments)
    given_path = {"str": absolute, "path": pathlib.Path(absolute),
                  "file-uri": "file://" + absolute}[form]
    ckpt = impl.train.Checkpoint(given_path)
    setting = f"Checkpoint({given_path!r})"
    assertions.equal(ckpt.path, absolute, "path", setting)
    assertions.equal(_is_local(ckpt.filesystem), True,
                     f"filesystem={ckpt.filesystem!r} is a pyarrow LocalFileSystem", setting)


@clause("checkpoint.to-directory")
@given(tree=s.trees(), target=st.sampled_from(["new", "nested-new", "existing", "temporary"]))
def check_to_directory_copies(impl, tree, target):
    with _workspace() as root:
        src = _source(root, tree)
        ckpt = impl.train.Checkpoint.from_directory(src)
        setting = f"Checkpoint.from_directory(<{s.describe_tree(tree)}>).to_directory({target})"
        if target == "temporary":
            out = ckpt.to_directory()
        else:
            dest = os.path.join(root, {"new": "out", "nested-new": "a/b/out",
                                       "existing": "out"}[target])
            if target == "existing":
                os.mkdir(dest)
            out = ckpt.to_directory(dest)
            assertions.equal(os.path.normpath(out), os.path.normpath(dest), "returned path",
                             setting)
        try:
            assertions.equal(os.path.isdir(out), True, f"isdir({out!r})", setting)
            real_src, real_out = os.path.realpath(src), os.path.realpath(out)
            if real_out == real_src or real_out.startswith(real_src + os.sep):
                raise AssertionError(f"to_directory()={out!r}, expected a new directory "
                                     f"outside the source {src!r} [{setting}]")
            _same_tree(out, tree, "copy", setting)
            # A copy, not a link: writing into it leaves the source alone.
            with open(os.path.join(out, "written-after-copy"), "wb") as f:
                f.write(b"x")
            _same_tree(src, tree, "source after to_directory", setting)
        finally:
            if target == "temporary":
                shutil.rmtree(out, ignore_errors=True)


@clause("checkpoint.as-directory")
@given(tree=s.trees(max_leaves=6), raise_inside=st.booleans())
def check_as_directory_no_copy(impl, tree, raise_inside):
    with _workspace() as root:
        src = _source(root, tree)
        ckpt = impl.train.Checkpoint.from_directory(src)
        setting = f"Checkpoint.from_directory(<{s.describe_tree(tree)}>).as_directory()"
        with contextlib.suppress(KeyError):
            with ckpt.as_directory() as seen:
                assertions.equal(seen, ckpt.path, "as_directory() yielded", setting)
                _same_tree(seen, tree, "inside as_directory()", setting)
                if raise_inside:
                    raise KeyError("leaving the context with an exception")
        assertions.equal(os.path.isdir(src), True, f"isdir({src!r}) after the context", setting)
        _same_tree(src, tree, "source after as_directory()", setting)


_METADATA_OPS = st.lists(st.tuples(st.sampled_from(["set", "update"]), s.json_dicts()),
                         max_size=5)


@clause("checkpoint.metadata")
@given(ops=_METADATA_OPS)
def check_metadata(impl, ops):
    with _workspace() as root:
        src = _source(root, {"model.bin": b"weights"})
        ckpt = impl.train.Checkpoint.from_directory(src)
        setting = f"ops={ops!r}"
        assertions.equal(ckpt.get_metadata(), {}, "get_metadata() before any set", setting)
        model: dict = {}
        for op, metadata in ops:
            if op == "set":
                ckpt.set_metadata(metadata)
                model = dict(metadata)
            else:
                ckpt.update_metadata(metadata)
                model.update(metadata)
            assertions.equal(ckpt.get_metadata(), model, f"get_metadata() after {op}", setting)
        other = impl.train.Checkpoint.from_directory(src)
        assertions.equal(other.get_metadata(), model, "get_metadata() of a second Checkpoint on "
                         "the same folder", setting)
        copy = ckpt.to_directory(os.path.join(root, "copy"))
        assertions.equal(impl.train.Checkpoint.from_directory(copy).get_metadata(), model,
                         "get_metadata() of the to_directory() copy", setting)


@clause("checkpoint.pickle")
@given(protocol=st.integers(2, pickle.HIGHEST_PROTOCOL), tree=s.trees(max_leaves=3),
       via_uri=st.booleans())
def check_pickle(impl, protocol, tree, via_uri):
    with _workspace() as root:
        src = _source(root, tree)
        cls = impl.train.Checkpoint
        ckpt = cls("file://" + src) if via_uri else cls.from_directory(src)
        setting = f"pickle.dumps({ckpt!r}, protocol={protocol})"
        copy = pickle.loads(pickle.dumps(ckpt, protocol=protocol))
        assertions.equal(copy.path, ckpt.path, "path", setting)
        assertions.equal(type(copy.filesystem), type(ckpt.filesystem), "type(filesystem)", setting)
        assertions.equal(copy.filesystem == ckpt.filesystem, True, "filesystem equal", setting)
        assertions.equal(copy == ckpt, False, "unpickled copy == original", setting)
        assertions.equal(ckpt == ckpt, True, "checkpoint == itself", setting)
        assertions.equal(cls.from_directory(src) == cls.from_directory(src), False,
                         "two checkpoints of one folder compare equal", setting)
        out = copy.to_directory(os.path.join(root, "out"))
        _same_tree(out, tree, "to_directory() of the unpickled copy", setting)


@clause("checkpoint.round-trip")
@given(tree=s.trees(max_leaves=10))
def check_round_trip(impl, tree):
    with _workspace() as root:
        src = _source(root, tree)
        setting = f"tree=<{s.describe_tree(tree)}>"
        first = impl.train.Checkpoint.from_directory(src).to_directory(
            os.path.join(root, "first"))
        _same_tree(first, tree, "to_directory(path)", setting)
        second = impl.train.Checkpoint.from_directory(first).to_directory()
        try:
            _same_tree(second, tree, "to_directory() of the copy", setting)
        finally:
            shutil.rmtree(second, ignore_errors=True)


@clause("checkpoint.round-trip")
def check_round_trip_example(impl):
    tree = {"model": {"weights.bin": bytes(range(256)) * 40, "empty-dir": {}},
            "empty.txt": b"", "deep": {"a": {"b": {"c": {}}}}}
    with _workspace() as root:
        src = _source(root, tree)
        out = impl.train.Checkpoint.from_directory(src).to_directory(os.path.join(root, "o"))
        _same_tree(out, tree, "to_directory(path)", "fixed example tree")
