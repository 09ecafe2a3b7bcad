"""The gRPC client of the transposed daemon.

Client wraps one grpc channel and the calls of transposed.v1.Transposer with plain keyword
arguments; answers are the generated protobuf messages (transposed.v1.transposed_pb2), errors are
transposed.Error with the gRPC status code name and the daemon's message. The connection options
are transposectl's: the address ($TRANSPOSED_SERVER), the admin token (token_file,
$TRANSPOSED_TOKEN_FILE; or token), TLS (tls, tls_ca) and mutual TLS (tls_cert, tls_key),
tls_server_name. A Client may be shared between threads (grpc channels are thread-safe).

Every problem a Client asks GetConfig for and the daemon accepts (answered, or a cache-only miss;
and so every transpose / contiguous_t of this process) is recorded, at most MAX_RECORDED_PROBLEMS distinct ones: recorded_problems() lists them and
write_recorded_problems() writes them in `transposectl tune --from`'s format, so that the next
run of the job pre-tunes them in its prolog (docs/user/polite.md).
"""
import json
import os
import threading

import grpc

from transposed.v1 import transposed_pb2 as pb
from transposed.v1 import transposed_pb2_grpc as pb_grpc

DEFAULT_ADDRESS = "127.0.0.1:50051"
# The most problems one tune_many call takes (the daemon's limit, kMaxTuneManyProblems).
MAX_TUNE_MANY_PROBLEMS = 256

# Request policies of GetConfig, by the names the CLI uses (any case: "CACHE_ONLY" too).
POLICIES = {
    "tune_if_missing": pb.TUNE_IF_MISSING,
    "cache_only": pb.CACHE_ONLY,
}
if hasattr(pb, "ANSWER_NOW"):
    POLICIES["answer_now"] = pb.ANSWER_NOW

# The most distinct problems recorded per process (later new ones are not recorded).
MAX_RECORDED_PROBLEMS = 4096
_recorded_lock = threading.Lock()
_recorded = {}  # serialized Problem (no device selector) -> Problem, in first-asked order


def _record(p):
    q = pb.Problem()
    q.CopyFrom(p)
    q.ClearField("device")  # the next run's device is its own
    key = q.SerializeToString(deterministic=True)
    with _recorded_lock:
        if key not in _recorded and len(_recorded) < MAX_RECORDED_PROBLEMS:
            _recorded[key] = q


def recorded_problems():
    """The distinct problems this process asked the daemon for (Client.get_config, and so
    transpose and contiguous_t), in first-asked order, as transposed.v1.Problem messages without
    their device selector; at most MAX_RECORDED_PROBLEMS."""
    with _recorded_lock:
        out = []
        for q in _recorded.values():
            c = pb.Problem()
            c.CopyFrom(q)
            out.append(c)
        return out


def _from_line(p):
    """One line of `transposectl tune --from`: "ROWS COLS DTYPE [BATCH]", or the Problem as
    JSON when it has leading dimensions or asks for value-exact answers."""
    if p.ld_in == 0 and p.ld_out == 0 and p.exactness == pb.EXACTNESS_BIT:
        return f"{p.rows} {p.cols} {p.dtype}" + (f" {p.batch}" if p.HasField("batch") else "")
    d = {"rows": p.rows, "cols": p.cols, "dtype": p.dtype}
    if p.HasField("batch"):
        d["batch"] = p.batch
    if p.ld_in:
        d["ld_in"] = p.ld_in
    if p.ld_out:
        d["ld_out"] = p.ld_out
    if p.exactness != pb.EXACTNESS_BIT:
        d["exactness"] = pb.Exactness.Name(p.exactness)
    return json.dumps(d, separators=(",", ":"))


def write_recorded_problems(path):
    """Writes recorded_problems() to `path` (a file name, or a file object opened for text) in
    `transposectl tune --from`'s format, one problem a line; returns how many."""
    problems = recorded_problems()
    text = "".join(_from_line(p) + "\n" for p in problems)
    if hasattr(path, "write"):
        path.write(text)
    else:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    return len(problems)


class Error(RuntimeError):
    """An error from the daemon (or from reaching it): .code is the gRPC status code name
    ("INVALID_ARGUMENT", "NOT_FOUND", "UNAVAILABLE", ...), .message the daemon's text."""

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def _error(e):
    code = e.code() if hasattr(e, "code") else None
    name = code.name if code is not None else "UNKNOWN"
    details = e.details() if hasattr(e, "details") else str(e)
    return Error(name, details or "")


def _policy(policy):
    name = policy.lower() if isinstance(policy, str) else policy
    if name not in POLICIES:
        raise ValueError(f"policy: one of {sorted(POLICIES)} (any case), got {policy!r}")
    return POLICIES[name]


def _read(path, what):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ValueError(f"{what}: cannot read {path}: {e.strerror}") from None


def _read_token(path):
    """The admin token file as transposectl reads it: its first line, trailing blanks dropped."""
    lines = _read(path, "token_file").decode("utf-8", "replace").splitlines()
    token = lines[0].rstrip("\r ") if lines else ""
    if not token:
        raise ValueError(f"token_file: {path} is empty")
    return token


def device_selector(device):
    """None (the daemon's first device), an int index, or a UUID string."""
    sel = pb.DeviceSelector()
    if device is None:
        return sel
    if isinstance(device, bool) or not isinstance(device, (int, str)):
        raise TypeError(f"device: an index or a UUID string, got {device!r}")
    if isinstance(device, int) or device.isdigit():
        sel.index = int(device)
    else:
        sel.uuid = device
    return sel


def problem(rows, cols, dtype, batch=1, ld_in=0, ld_out=0, device=None, value_exact=False):
    """A transposed.v1.Problem from its fields (dtype by name: "f32", "bf16", ...).

    value_exact=True accepts an answer that may change NaN payloads (every other element stays
    bit-exact), which admits cuBLAS geam for f32/f64; it is tuned and cached apart from the
    default bit-exact answer (docs/user/api.md "Value-exact answers")."""
    p = pb.Problem(rows=int(rows), cols=int(cols), dtype=str(dtype), ld_in=int(ld_in),
                   ld_out=int(ld_out))
    if value_exact:
        p.exactness = pb.EXACTNESS_VALUE
    if batch is not None and int(batch) != 1:
        p.batch = int(batch)
    p.device.CopyFrom(device_selector(device))
    return p


def _filter(device=None, fingerprint=None, dtype=None, rows=None, cols=None, variant=None,
            library_version=None, tuned_before_unix_ms=None):
    f = pb.EntryFilter()
    if device is not None:
        f.device.CopyFrom(device_selector(device))
    if fingerprint:
        f.device_fingerprint = fingerprint
    if dtype:
        f.dtype = dtype
    if rows:
        f.rows = int(rows)
    if cols:
        f.cols = int(cols)
    if variant:
        f.variant = variant
    if library_version:
        f.library_version = library_version
    if tuned_before_unix_ms:
        f.tuned_before_unix_ms = int(tuned_before_unix_ms)
    return f


class Client:
    """A connection to a transposed daemon.

    address: "host:port" (or any gRPC target); default $TRANSPOSED_SERVER, else 127.0.0.1:50051.
    timeout: deadline of every call in seconds (a miss tunes, so keep it generous).
    token_file: file with the daemon's admin token (--admin-token-file), needed by tune,
        tune_many(force=True) and delete against a daemon that has one; default
        $TRANSPOSED_TOKEN_FILE. token: the token itself instead of a file.
    tls: connect with TLS (implied by tls_ca and tls_cert). tls_ca: PEM CA that signed the
        daemon's certificate (default: the system's roots). tls_cert, tls_key: PEM client
        certificate and key (mutual TLS; give both). tls_server_name: the name the daemon's
        certificate must carry (default: the host of address).
    """

    def __init__(self, address=None, timeout=600.0, wait_for_ready=False, token=None,
                 token_file=None, tls=False, tls_ca=None, tls_cert=None, tls_key=None,
                 tls_server_name=None):
        self.address = address or os.environ.get("TRANSPOSED_SERVER") or DEFAULT_ADDRESS
        if timeout is None or timeout <= 0:
            raise ValueError(f"timeout: must be > 0 seconds, got {timeout!r}")
        self.timeout = float(timeout)
        self.wait_for_ready = bool(wait_for_ready)
        if token is not None and token_file is not None:
            raise ValueError("token and token_file: give one or neither")
        if token is None:
            token_file = token_file or os.environ.get("TRANSPOSED_TOKEN_FILE") or None
            if token_file:
                token = _read_token(token_file)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else None
        if bool(tls_cert) != bool(tls_key):
            raise ValueError("tls_cert and tls_key: give both or neither")
        options = []
        if tls_server_name:
            options.append(("grpc.ssl_target_name_override", tls_server_name))
        if tls or tls_ca or tls_cert:
            creds = grpc.ssl_channel_credentials(
                root_certificates=_read(tls_ca, "tls_ca") if tls_ca else None,
                private_key=_read(tls_key, "tls_key") if tls_key else None,
                certificate_chain=_read(tls_cert, "tls_cert") if tls_cert else None)
            self._channel = grpc.secure_channel(self.address, creds, options=options)
        else:
            self._channel = grpc.insecure_channel(self.address, options=options)
        self._stub = pb_grpc.TransposerStub(self._channel)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, request, timeout=None):
        try:
            return method(request, timeout=timeout or self.timeout,
                          wait_for_ready=self.wait_for_ready, metadata=self._metadata)
        except grpc.RpcError as e:
            raise _error(e) from None

    def get_config(self, rows, cols, dtype, batch=1, ld_in=0, ld_out=0, device=None,
                   policy="tune_if_missing", timeout=None, value_exact=False):
        """The best configuration for a problem: a transposed.v1.Answer (.variant.name, .gbps,
        .source...). policy: "tune_if_missing" (a miss tunes first), "cache_only" (a miss is
        Error NOT_FOUND) or "answer_now" (a miss answers at once; docs/user/api.md), in any case.
        value_exact: see problem()."""
        req = pb.GetConfigRequest(problem=problem(rows, cols, dtype, batch, ld_in, ld_out, device,
                                                  value_exact),
                                  policy=_policy(policy))
        try:
            answer = self._call(self._stub.GetConfig, req, timeout)
        except Error as e:
            # A cache-only miss is a problem the job uses; a refused one (a bad shape) is not.
            if e.code == "NOT_FOUND":
                _record(req.problem)
            raise
        _record(req.problem)
        return answer

    def tune(self, rows, cols, dtype, batch=1, ld_in=0, ld_out=0, device=None,
             budget_seconds=0.0, exhaustive=False, timeout=None, value_exact=False):
        """Re-tunes a problem; an iterator of transposed.v1.TuneProgress (one per candidate as it
        is measured, then one whose .answer is the stored winner). value_exact: see problem()."""
        req = pb.TuneRequest(problem=problem(rows, cols, dtype, batch, ld_in, ld_out, device,
                                             value_exact),
                             budget_seconds=float(budget_seconds), exhaustive=bool(exhaustive))
        try:
            for progress in self._stub.Tune(req, timeout=timeout or self.timeout,
                                            wait_for_ready=self.wait_for_ready,
                                            metadata=self._metadata):
                yield progress
        except grpc.RpcError as e:
            raise _error(e) from None

    def tune_many(self, problems, budget_seconds=0.0, exhaustive=False, force=False,
                  timeout=None, background=False):
        """Pre-tunes a list of problems (a job's prolog; at most MAX_TUNE_MANY_PROBLEMS per call)
        through the TuneMany RPC: cached ones are skipped, the others tuned one after the other
        (force=True re-tunes them all; admin, as tune()); background=True tunes politely, yielding
        to other work on a busy GPU (docs/user/polite.md). problems: transposed.v1.Problem
        messages, dicts of problem()'s arguments, or tuples (rows, cols, dtype[, batch]).

        An iterator of transposed.v1.TuneManyProgress, in the list's order: per problem
        (.problem_index) its candidates (.progress.candidate), then its answer (.progress.answer;
        .source SOURCE_CACHE when it was skipped) or, if its tune failed, .error (.code, a gRPC
        status code number, and .message). A bad problem fails the whole call before anything is
        tuned: Error INVALID_ARGUMENT "problems[3].rows: ...". Stopping the iteration early
        cancels the call: the tune in flight is still stored, the problems after it are dropped.
        """
        req = pb.TuneManyRequest(budget_seconds=float(budget_seconds), exhaustive=bool(exhaustive),
                                 force=bool(force))
        if background:
            req.background = True
        for i, p in enumerate(problems):
            if isinstance(p, pb.Problem):
                req.problems.append(p)
            elif isinstance(p, dict):
                req.problems.append(problem(**p))
            elif isinstance(p, (tuple, list)) and 3 <= len(p) <= 4:
                req.problems.append(problem(*p))
            else:
                raise TypeError(f"problems[{i}]: a transposed.v1.Problem, a dict of problem()'s "
                                f"arguments or (rows, cols, dtype[, batch]), got {p!r}")
        call = self._stub.TuneMany(req, timeout=timeout or self.timeout,
                                   wait_for_ready=self.wait_for_ready, metadata=self._metadata)
        try:
            for progress in call:
                yield progress
        except grpc.RpcError as e:
            raise _error(e) from None
        finally:
            call.cancel()  # no-op once the stream ended; else the daemon drops the rest

    def devices(self, timeout=None):
        """The daemon's devices: a list of transposed.v1.Device."""
        return list(self._call(self._stub.ListDevices, pb.ListDevicesRequest(), timeout).devices)

    def list(self, include_candidates=False, limit=0, timeout=None, page_size=0,
             **filter_fields):
        """Cached entries, newest first: a list of transposed.v1.Entry, every page of them (at
        most limit when limit > 0). Filters: device, fingerprint, dtype, rows, cols, variant,
        library_version, tuned_before_unix_ms. iter_entries() yields them page by page."""
        return list(self.iter_entries(include_candidates=include_candidates, limit=limit,
                                      timeout=timeout, page_size=page_size, **filter_fields))

    def iter_entries(self, include_candidates=False, limit=0, timeout=None, page_size=0,
                     **filter_fields):
        """Like list(), but an iterator: one ListEntries call per page (page_size entries, 0:
        the daemon's default), the next one only when the iteration gets there."""
        limit = int(limit)
        if limit < 0:
            raise ValueError(f"limit: must be >= 0, got {limit}")
        req = pb.ListEntriesRequest(filter=_filter(**filter_fields),
                                    include_candidates=bool(include_candidates),
                                    page_size=int(page_size))
        given = 0
        while True:
            if limit:
                left = limit - given
                if not page_size or left < page_size:
                    req.page_size = min(left, 1000)
            response = self._call(self._stub.ListEntries, req, timeout)
            for entry in response.entries:
                if limit and given >= limit:
                    return
                given += 1
                yield entry
            if not response.next_page_token or (limit and given >= limit):
                return
            req.page_token = response.next_page_token

    def delete(self, all=False, timeout=None, **filter_fields):  # noqa: A002 (the API's name)
        """Deletes the entries matching the filter (as list()); an empty filter needs all=True.
        Returns how many were deleted."""
        req = pb.DeleteEntriesRequest(filter=_filter(**filter_fields), all=bool(all))
        return self._call(self._stub.DeleteEntries, req, timeout).deleted
