"""The online pass over a file of labelled sparse rows (svmlight text or a sparse-row HDF5 file):
batches read ahead by a background thread, absorbed one by one (``RegressionResult.update``),
with rows/s in the progress line, checkpoints and resume (``fastcep glm stream``)."""

import contextlib
import hashlib
import os
import time
import warnings

import numpy as np

from .. import _validation as V
from .._loop import ConvergenceWarning, ProgressLine, outside_the_package
from ..io.checkpoint import settings_differ
from ..io.csr import CSRReader
from ..io.files import FileFormatError
from ..io.kinds import KIND_WORDS, checked_kind
from ..io.prefetch import read_ahead
from ..io.sources import stream_words
from ..io.svmlight import binary_labels, iter_svmlight
from ..likelihoods import resolve as resolve_likelihood
from ..tensor.layout import entries_digest
from .result import RegressionResult

#: rows a batch holds by default
BATCH_ROWS = 10_000
#: bytes at each end of the file that checkpoints before row digests are bound to
IDENTITY_BYTES = 1 << 20


def identity(path):
    """What a checkpoint written before row digests is bound to: the file's size and a digest of
    its first and last MiB (a file rewritten in place with the same size and ends passes)."""
    h = hashlib.sha256()
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        h.update(fh.read(IDENTITY_BYTES))
        fh.seek(max(size - IDENTITY_BYTES, 0))
        h.update(fh.read(IDENTITY_BYTES))
    return f"{size}:{h.hexdigest()}"


def rows_digest(previous, part):
    """The digest of a stream's rows up to the end of the block ``part`` (``SparseRows``), from
    the digest of the rows before it (``previous``, "" at the start): the block's nonzeros as the
    entries (row, column, value) of a matrix of its shape (``tensor.layout.entries_digest``, as
    a CP stream's checkpoint binds its entries) and its labels, chained to ``previous``."""
    X = part.X
    coords = np.column_stack([np.repeat(np.arange(X.shape[0]), np.diff(X.indptr)), X.indices])
    h = hashlib.sha256((previous + entries_digest(X.shape, [(coords, X.data)])).encode())
    h.update(np.ascontiguousarray(part.y, dtype=np.float64).tobytes())
    return h.hexdigest()


def open_rows(path, batch_rows, n_features=None, index_base=0, func="stream_file"):
    """``(width, n_rows or None, blocks(start_row))`` of a file of labelled sparse rows:
    svmlight text (``n_features`` needed, else the file is read once for its largest index) or a
    sparse-row HDF5 file; ``blocks`` yields ``SparseRows`` of ``batch_rows`` from a row on."""
    path = os.fspath(path)
    kind = checked_kind(path)
    if kind == "missing":
        raise FileNotFoundError(f"{func}: no such file {path!r}.")
    if kind in ("fastcep-csr", "damaged"):  # (a damaged file: the reader says what is wrong)
        with CSRReader(path) as r:
            width, n = r.n_features, r.n
        if n_features is not None and n_features != width:
            raise ValueError(f"{func}: {path!r} has {width} columns, not n_features={n_features}.")

        def csr_blocks(start):
            with CSRReader(path) as r:
                yield from r.blocks(batch_rows, start)

        return width, n, csr_blocks
    if kind in ("svmlight", "numbers", "text"):
        once = stream_words(path)
        if n_features is None and once is not None:
            raise ValueError(
                f"{func}: {path!r} is {once}, which can be read only once, and svmlight text without "
                "n_features is read twice (first for its largest index): give n_features, the rows' width"
            )
        if n_features is None:
            n_features = 1
            for part in iter_svmlight(path, index_base=index_base):
                n_features = max(n_features, part.X.shape[1])

        def text_blocks(start):
            for part in iter_svmlight(path, batch_rows, n_features, index_base):
                end = part.first + part.y.size
                if end > start:
                    skip = max(start - part.first, 0)
                    yield part._replace(
                        first=part.first + skip, X=part.X[skip:], y=part.y[skip:], lines=part.lines[skip:]
                    )

        return n_features, None, text_blocks
    fix = "; convert a table with `fastcep convert`" if kind == "table" else ""
    raise FileFormatError(
        f"{func}: {path!r} is not svmlight text or a sparse-row HDF5 file: it is "
        f"{KIND_WORDS.get(kind, kind)}{fix}"
    )


def stream_file(
    path, model="probit", method="cep1", *, batch_rows=BATCH_ROWS, forget=0.0, max_iter=None, tol=1e-5,
    prior_var=1.0, fit_intercept=True, intercept_var=100.0, n_features=None, index_base=0, init=None,
    checkpoint=None, checkpoint_every=100, resume=False, progress=False, n_threads=None, client=None,
    passes=3,
):  # fmt: skip
    """One online pass over a file of labelled sparse rows: each batch is absorbed into the
    posterior (assumed density filtering with CEP, ``RegressionResult.update``), so memory is
    bounded by a batch whatever the file's length.

    Parameters
    ----------
    path : str or PathLike
        svmlight / libsvm text, or a sparse-row HDF5 file (``fastcep convert``).
    model, method : str
        A built-in likelihood's name ("probit", "logistic", "poisson", ...) and "cep1", "cep2"
        or "ep". Binary labels are 0/1 or -1/1.
    batch_rows : int
        Rows a batch.
    forget, max_iter, tol
        As ``RegressionResult.update`` (per row forgetting; sweeps and stop rule of a batch).
    prior_var, fit_intercept, intercept_var
        The prior the stream starts from (unless ``init``).
    n_features : int, optional
        The width; svmlight text without it is read once for its largest index.
    index_base : {0, 1}
        Of svmlight text.
    init : RegressionResult, optional
        A posterior to start from (a batch fit, a loaded model); it is updated in place.
    checkpoint : str or PathLike, optional
        A regression model file written every ``checkpoint_every`` batches and at the end (a
        model that ``glm evaluate`` reads, and that a stream resumes from bit for bit).
    resume : bool
        Start from ``checkpoint`` if it exists (else afresh): its rows are read again but not
        absorbed, and their digest (``rows_digest``), the batch size and the forgetting must be
        the checkpoint's; the stream then ends with the bits of an uninterrupted one.
    progress : bool
        A progress line on stderr: rows, rows/s, batches.
    client : distributed.Client or None
        Stream on this Dask cluster (``fastcep.cluster.glm_stream``): a sparse-row HDF5 file's
        rows cut into one shard per worker and read there, each absorbed from the start, the
        shards combined as EP over shards (the start plus each shard's net message), then
        ``passes`` - 1 refinement passes against the others' messages. No forgetting, no
        checkpoints.
    passes : int >= 1
        With ``client``: the passes over the shards.

    Returns
    -------
    RegressionResult
        ``options["stream"]``: the batch size, the forgetting, the rows streamed and their digest
        (``rows_sha256``), the batches whose sweeps stopped at ``max_iter`` and the seconds.
    """
    from ..io.glm_model import load_glm_model, save_glm_model

    func = "stream_file"
    batch_rows = V.check_int(batch_rows, "batch_rows", func, low=1)
    forget = V.check_float(forget, "forget", func, 0.0, 1.0, high_open=True)
    checkpoint_every = V.check_int(checkpoint_every, "checkpoint_every", func, low=1)
    if resume and checkpoint is None:
        raise ValueError(f"{func}: resume=True needs the checkpoint to resume from (checkpoint=path).")
    likelihood = resolve_likelihood(model, func)
    if likelihood.learned:
        raise ValueError(
            f"{func}: the likelihood's parameters {likelihood.learned} must have values in a stream (an "
            "online update does not learn them); give them, or fit a first batch and pass it as init"
        )
    if client is not None:
        from ..cluster import check_client, glm_stream

        check_client(client, func)
        passes = V.check_int(passes, "passes", func, low=1)
        glm_stream.refusals(path, forget, checkpoint, resume, init, func)
    once = stream_words(path)
    if once is not None and checkpoint is not None:
        raise ValueError(
            f"{func}: {os.fspath(path)!r} is {once}, which cannot be read again to resume from a checkpoint: "
            "write the rows to a file first, or stream without a checkpoint"
        )
    width, n_rows, blocks = open_rows(path, batch_rows, n_features, index_base, func)
    source = {"batch_rows": batch_rows, "forget": forget}
    resumed = resume and os.path.exists(checkpoint)  # (resume=True without a checkpoint yet: a fresh start)
    if resumed:
        res = load_glm_model(checkpoint).result
        _check_resume(res.options.get("stream"), source, path, checkpoint, func)
    elif init is not None:
        if not isinstance(init, RegressionResult):
            raise TypeError(f"{func}: init must be a RegressionResult, got {type(init).__name__}.")
        res = init
    else:
        opts = dict(prior_var=prior_var, fit_intercept=fit_intercept, intercept_var=intercept_var, tol=tol)
        res = RegressionResult.prior(likelihood, method, width, dict(opts, n_threads=n_threads))
    if res.posterior.mean.size != width:
        raise ValueError(
            f"{func}: {os.fspath(path)!r} has {width} columns, the posterior {res.posterior.mean.size}."
        )
    if client is not None:  # (EP over shards on the cluster: ``cluster.glm_stream``)
        out = glm_stream.stream(client, path, res, batch_rows, max_iter, tol, passes, func)
        out.options["stream"].update(source)
        return out
    stream = dict(res.options["stream"], **source) if resumed else dict(source)
    stream.pop("file", None)  # (a checkpoint's before row digests: bound by rows_sha256 from here)
    stream.setdefault("rows", 0)
    stream.setdefault("stopped_at_max_iter", 0)
    res.options["stream"] = stream
    start = stream["rows"]
    held, digest, skipped = stream.pop("rows_sha256", None), "", 0
    line = ProgressLine("glm stream") if progress else None
    t0, rows, batch = time.perf_counter(), 0, 0
    # (a resumed stream reads its first rows again, for their digest: the checkpoint's must match)
    with contextlib.closing(read_ahead(blocks(0))) as parts:  # (closed: the reading thread stops)
        for part in parts:
            digest = rows_digest(digest, part)
            if skipped < start:
                skipped += part.y.size
                if skipped >= start:
                    _check_rows(held, digest, skipped, start, path, checkpoint, func)
                continue
            y = binary_labels(part, path, func) if res.likelihood.binary else part.y
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                res.update(part.X, y, forget=forget, max_iter=max_iter, tol=tol)
            for w in caught:  # (a batch stopped at max_iter: counted, and said once at the end)
                if issubclass(w.category, ConvergenceWarning):
                    stream["stopped_at_max_iter"] += 1
                else:
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            rows += part.y.size
            stream["rows"] += part.y.size
            stream["rows_sha256"] = digest
            batch += 1
            if checkpoint is not None and batch % checkpoint_every == 0:
                save_glm_model(res, checkpoint)
            if line is not None:
                secs = time.perf_counter() - t0
                of = f" of {n_rows - start:,}" if n_rows is not None else ""
                line.update(f"{rows:,}{of} rows, {rows / max(secs, 1e-9):,.0f} rows/s, {batch} batches")
    if skipped < start:
        _check_rows(held, digest, skipped, start, path, checkpoint, func)
    stream.setdefault("rows_sha256", digest)
    if rows == 0 and start == 0:
        raise FileFormatError(f"{func}: {os.fspath(path)!r} holds no rows.")
    if checkpoint is not None:
        save_glm_model(res, checkpoint)
    secs = time.perf_counter() - t0
    stream["seconds"] = stream.get("seconds", 0.0) + secs
    if line is not None:
        line.close(f"{rows:,} rows in {secs:.1f} s, {rows / max(secs, 1e-9):,.0f} rows/s, {batch} batches")
    if stream["stopped_at_max_iter"]:
        warnings.warn(
            f"{func}: the sweeps of {stream['stopped_at_max_iter']} batches stopped at max_iter before their "
            "change fell below tol (each such batch is absorbed as it stands); raise max_iter",
            ConvergenceWarning,
            stacklevel=outside_the_package(),
        )
    return res


def _check_resume(held, source, path, checkpoint, func):
    """Refuse a checkpoint (its ``options["stream"]``: ``held``) of a stream with other settings
    than ``source``'s; a checkpoint written before row digests is checked against the file's
    ``identity``, with a warning."""
    where = f"{func}: the checkpoint {os.fspath(checkpoint)!r}"
    if not isinstance(held, dict) or "rows" not in held:
        raise ValueError(f"{where} is not a stream's checkpoint (a model without a stream's position)")
    detail = settings_differ(held, source, tuple(source))
    if detail:
        raise ValueError(
            f"{where} is of another stream, with other settings ({detail}); resume with its settings, or "
            "start afresh without resume"
        )
    if "rows_sha256" not in held:
        if held.get("file") != identity(path):
            raise ValueError(
                f"{where} is of another stream, over another file; resume on its file, or start afresh "
                "without resume"
            )
        warnings.warn(
            f"{where} predates row digests: fastcep checks only that {os.fspath(path)!r} has the size "
            "and the first and last MiB of the file it was written for",
            UserWarning,
            stacklevel=outside_the_package(),
        )


def _check_rows(held, digest, rows, start, path, checkpoint, func):
    """Refuse a resume whose file's first ``start`` rows (read: ``rows``, their digest ``digest``)
    are not those the checkpoint absorbed (their digest ``held``; None: a checkpoint written
    before row digests, checked by ``_check_resume``)."""
    where = f"{func}: the checkpoint {os.fspath(checkpoint)!r}"
    if rows != start:
        held_rows = f"holds only {rows:,}" if rows < start else "has no batch that ends there"
        raise ValueError(
            f"{where} has absorbed {start:,} rows, and {os.fspath(path)!r} {held_rows}: it was written for "
            "other data; resume on the same data, or start afresh without resume"
        )
    if held is not None and held != digest:
        raise ValueError(
            f"{where} was written for other data: the first {start:,} rows of {os.fspath(path)!r} differ "
            "from the rows it absorbed; resume on the same data, or start afresh without resume"
        )
