"""The Python client against the real daemon (run under testing/with_daemon, which sets
TRANSPOSED_SERVER), and the C ABI's host-side checks through ctypes. No GPU needed."""
import os
import statistics
import subprocess
import tempfile
import time
import unittest

import transposed
from transposed import pb


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.environ.get("TRANSPOSED_SERVER"):
            raise unittest.SkipTest("TRANSPOSED_SERVER is not set (run under with_daemon)")
        cls.c = transposed.Client(timeout=120)

    def test_miss_tunes_then_hit_from_cache(self):
        a = self.c.get_config(96, 80, "f32")
        self.assertEqual(a.source, pb.SOURCE_TUNED)
        self.assertTrue(a.variant.name)
        self.assertGreater(a.gbps, 0)
        self.assertEqual(a.problem.rows, 96)
        b = self.c.get_config(96, 80, "f32")
        self.assertEqual(b.source, pb.SOURCE_CACHE)
        self.assertEqual(b.variant.name, a.variant.name)

    def test_value_exact_is_tuned_and_cached_apart(self):
        bit = self.c.get_config(88, 72, "f64")
        self.assertEqual(bit.problem.exactness, pb.EXACTNESS_BIT)
        # Not served from the bit-exact entry: a tune of its own, then its own cache entry.
        value = self.c.get_config(88, 72, "f64", value_exact=True)
        self.assertEqual(value.source, pb.SOURCE_TUNED)
        self.assertEqual(value.problem.exactness, pb.EXACTNESS_VALUE)
        again = self.c.get_config(88, 72, "f64", value_exact=True, policy="cache_only")
        self.assertEqual(again.source, pb.SOURCE_CACHE)
        self.assertEqual(again.problem.exactness, pb.EXACTNESS_VALUE)
        self.assertEqual(self.c.get_config(88, 72, "f64", policy="cache_only").problem.exactness,
                         pb.EXACTNESS_BIT)
        kinds = sorted(e.answer.problem.exactness for e in self.c.list(rows=88, cols=72))
        self.assertEqual(kinds, [pb.EXACTNESS_BIT, pb.EXACTNESS_VALUE])
        # An integer dtype has no value-exact member: the same entry, no second tune.
        self.c.get_config(88, 72, "i32")
        same = self.c.get_config(88, 72, "i32", value_exact=True, policy="cache_only")
        self.assertEqual(same.source, pb.SOURCE_CACHE)
        self.assertEqual(same.problem.exactness, pb.EXACTNESS_BIT)

    def test_cache_only_miss_is_not_found(self):
        with self.assertRaises(transposed.Error) as e:
            self.c.get_config(33, 17, "i16", policy="cache_only")
        self.assertEqual(e.exception.code, "NOT_FOUND")

    def test_bad_problem_names_the_field(self):
        with self.assertRaises(transposed.Error) as e:
            self.c.get_config(0, 16, "f32")
        self.assertEqual(e.exception.code, "INVALID_ARGUMENT")
        self.assertIn("rows", e.exception.message)
        with self.assertRaises(transposed.Error) as e:
            self.c.get_config(16, 16, "f33")
        self.assertEqual(e.exception.code, "INVALID_ARGUMENT")
        self.assertIn("dtype", e.exception.message)
        with self.assertRaises(ValueError):
            self.c.get_config(16, 16, "f32", policy="whenever")

    def test_tune_streams_progress_then_the_answer(self):
        events = list(self.c.tune(64, 200, "f64", budget_seconds=5))
        self.assertGreaterEqual(len(events), 2)
        candidates = [e for e in events if e.WhichOneof("event") == "candidate"]
        self.assertTrue(candidates)
        self.assertTrue(all(1 <= e.index <= e.total for e in candidates))
        last = events[-1]
        self.assertEqual(last.WhichOneof("event"), "answer")
        self.assertEqual(last.answer.source, pb.SOURCE_TUNED)
        self.assertEqual(self.c.get_config(64, 200, "f64").variant.name, last.answer.variant.name)

    def test_tune_many_skips_cached_and_streams_in_order(self):
        self.c.get_config(56, 40, "f32")
        problems = [(56, 40, "f32"), {"rows": 72, "cols": 24, "dtype": "u8"},
                    transposed.problem(24, 72, "i32", batch=2)]
        messages = list(self.c.tune_many(problems, budget_seconds=2))
        indexes = [m.problem_index for m in messages]
        self.assertEqual(indexes, sorted(indexes))
        self.assertTrue(all(m.problem_count == 3 for m in messages))
        answers = {m.problem_index: m.progress.answer for m in messages
                   if m.WhichOneof("event") == "progress"
                   and m.progress.WhichOneof("event") == "answer"}
        self.assertEqual(sorted(answers), [0, 1, 2])
        self.assertEqual(answers[0].source, pb.SOURCE_CACHE)
        self.assertEqual(answers[1].source, pb.SOURCE_TUNED)
        self.assertEqual(answers[2].source, pb.SOURCE_TUNED)
        self.assertEqual(answers[2].problem.batch, 2)
        candidates = [m for m in messages if m.WhichOneof("event") == "progress"
                      and m.progress.WhichOneof("event") == "candidate"]
        self.assertNotIn(0, {m.problem_index for m in candidates})  # skipped, not tuned
        self.assertEqual({m.problem_index for m in candidates}, {1, 2})
        # Each problem's answer is its last message.
        for m, nxt in zip(messages, messages[1:]):
            if m.progress.WhichOneof("event") == "answer":
                self.assertEqual(nxt.problem_index, m.problem_index + 1)
        self.assertEqual(self.c.get_config(72, 24, "u8", policy="cache_only").variant.name,
                         answers[1].variant.name)

    def test_tune_many_bad_problem_names_index_and_field(self):
        with self.assertRaises(transposed.Error) as e:
            list(self.c.tune_many([(16, 8, "f32"), (0, 8, "f32")]))
        self.assertEqual(e.exception.code, "INVALID_ARGUMENT")
        self.assertTrue(e.exception.message.startswith("problems[1].rows: "), e.exception.message)
        with self.assertRaises(transposed.Error) as e:
            list(self.c.tune_many([(8, 8, "f32")] * (transposed.MAX_TUNE_MANY_PROBLEMS + 1)))
        self.assertIn("problems: between 1 and 256", e.exception.message)
        with self.assertRaises(TypeError):
            list(self.c.tune_many([(8, 8)]))
        with self.assertRaises(transposed.Error):
            self.c.get_config(16, 8, "f32", policy="cache_only")  # nothing was tuned

    def test_devices_list_delete(self):
        devices = self.c.devices()
        self.assertGreaterEqual(len(devices), 1)
        self.assertEqual(devices[0].index, 0)
        self.assertTrue(devices[0].fingerprint)
        self.c.get_config(40, 24, "u8")
        entries = self.c.list(dtype="u8", rows=40, cols=24)
        self.assertEqual(len(entries), 1)
        self.assertEqual(entries[0].answer.problem.cols, 24)
        self.assertEqual(self.c.delete(dtype="u8", rows=40, cols=24), 1)
        self.assertEqual(self.c.list(dtype="u8", rows=40, cols=24), [])
        with self.assertRaises(transposed.Error) as e:
            self.c.delete()  # an empty filter needs all=True
        self.assertEqual(e.exception.code, "INVALID_ARGUMENT")

    def test_list_follows_every_page(self):
        shapes = [(48, 16), (48, 24), (48, 32), (48, 40), (48, 56)]
        for rows, cols in shapes:
            self.c.get_config(rows, cols, "i8")
        # Pages of 2: three ListEntries calls, all five entries (the first page only was 2).
        entries = self.c.list(dtype="i8", rows=48, page_size=2)
        self.assertEqual(sorted(e.answer.problem.cols for e in entries), [16, 24, 32, 40, 56])
        self.assertEqual(len(self.c.list(dtype="i8", rows=48, page_size=2, limit=3)), 3)
        it = self.c.iter_entries(dtype="i8", rows=48, page_size=1)
        self.assertEqual(next(it).answer.problem.rows, 48)  # one page asked for so far
        self.assertEqual(len(list(it)), 4)
        with self.assertRaises(ValueError):
            self.c.list(limit=-1)

    def test_policy_names_in_any_case(self):
        self.c.get_config(26, 18, "f32")
        for policy in ("CACHE_ONLY", "Cache_Only", "cache_only"):
            self.assertEqual(self.c.get_config(26, 18, "f32", policy=policy).source,
                             pb.SOURCE_CACHE)
        self.assertEqual(self.c.get_config(26, 18, "f32", policy="TUNE_IF_MISSING").source,
                         pb.SOURCE_CACHE)
        with self.assertRaises(ValueError) as e:
            self.c.get_config(26, 18, "f32", policy="CACHE-ONLY")
        self.assertIn("cache_only", str(e.exception))

    def test_answer_now_never_waits_and_the_tune_lands_in_the_cache(self):
        self.c.devices()  # the channel is connected before anything is timed
        shapes = [(300, 500), (301, 499), (640, 480), (123, 457), (1000, 30)]
        times, answers = [], []
        for rows, cols in shapes:
            t = time.perf_counter()
            a = self.c.get_config(rows, cols, "i16", policy="answer_now")
            times.append((time.perf_counter() - t) * 1e3)
            answers.append(a)
            self.assertIn(a.source, (pb.SOURCE_NEAREST, pb.SOURCE_HEURISTIC))
            self.assertTrue(a.variant.name)
            self.assertEqual((a.problem.rows, a.problem.cols), (rows, cols))
        # The first has no neighbour of its element size; later ones may answer from one whose
        # tune has finished meanwhile (then nearest_problem names it).
        self.assertEqual(answers[0].source, pb.SOURCE_HEURISTIC)
        for a in answers:
            if a.source == pb.SOURCE_NEAREST:
                self.assertEqual(a.nearest_problem.dtype, "i16")
        # The daemon's own time to answer (its request log, latency_ms), and the round trip of
        # this Python client, which on a loaded CPU-backend test machine also waits for CPU time
        # against the background tunes themselves.
        served = []
        log = os.path.join(os.environ.get("TRANSPOSED_TEST_DIR", ""), "daemon.log")
        if os.path.exists(log):
            for line in open(log):
                if "rpc=GetConfig" in line and "i16" in line and (
                        "source=heuristic" in line or "source=nearest" in line):
                    served.append(float(line.split("latency_ms=")[1].split()[0]))
        print(f"ANSWER_NOW miss: daemon {served} ms; round trip (Python gRPC client) median "
              f"{statistics.median(times):.2f} ms, max {max(times):.2f} ms")
        # Generous bounds: they only catch an answer that waited for a tune (seconds each on
        # the CPU backend); the < 10 ms claim is checked on CPU time in answer_now_test.
        if os.environ.get("TRANSPOSED_TEST_DIR"):
            self.assertEqual(len(served), len(shapes), "the daemon log has no latency_ms lines")
            self.assertLess(statistics.median(served), 250.0)
        self.assertLess(statistics.median(times), 2000.0)
        # Every background tune lands in the cache; then the answer is SOURCE_CACHE.
        deadline = time.monotonic() + 240
        for rows, cols in shapes:
            while True:
                try:
                    a = self.c.get_config(rows, cols, "i16", policy="cache_only")
                    break
                except transposed.Error as e:
                    self.assertEqual(e.code, "NOT_FOUND")
                    self.assertLess(time.monotonic(), deadline, "the background tune never landed")
                    time.sleep(0.05)
            self.assertEqual(self.c.get_config(rows, cols, "i16", policy="answer_now").source,
                             pb.SOURCE_CACHE)

    def test_recorded_problems_round_trip_through_tune_from(self):
        # A job's run: the problems it asks for are recorded (here cache_only misses: nothing
        # is tuned by asking), written in tune --from's format, pre-tuned by the next run's
        # prolog (the real transposectl), and then hit.
        transposectl = os.environ.get("TRANSPOSECTL")
        if not transposectl:
            self.skipTest("TRANSPOSECTL is not set")
        asked = [dict(rows=61, cols=47, dtype="f32"), dict(rows=53, cols=41, dtype="u8", batch=3),
                 dict(rows=43, cols=37, dtype="f64", value_exact=True),
                 dict(rows=29, cols=31, dtype="i16", ld_in=40)]
        for p in asked:
            with self.assertRaises(transposed.Error) as e:
                self.c.get_config(policy="cache_only", **p)
            self.assertEqual(e.exception.code, "NOT_FOUND")
        recorded = transposed.recorded_problems()
        for p in asked:
            expected = transposed.problem(**p)
            expected.ClearField("device")  # recorded without: the next run's device is its own
            self.assertIn(expected, recorded)
        with tempfile.TemporaryDirectory() as d:
            shapes = os.path.join(d, "shapes.txt")
            n = transposed.write_recorded_problems(shapes)
            self.assertEqual(n, len(recorded))
            with open(shapes, encoding="utf-8") as f:
                lines = f.read().splitlines()
            self.assertIn("61 47 f32", lines)
            self.assertIn("53 41 u8 3", lines)
            run = subprocess.run([transposectl, "--server", os.environ["TRANSPOSED_SERVER"],
                                  "tune", "--from", shapes, "--background"],
                                 capture_output=True, text=True, timeout=240)
            self.assertEqual(run.returncode, 0, run.stderr)
        for p in asked:
            self.assertEqual(self.c.get_config(policy="cache_only", **p).source, pb.SOURCE_CACHE)

    def test_unreachable_daemon_is_unavailable(self):
        with transposed.Client("127.0.0.1:1", timeout=5) as c:
            with self.assertRaises(transposed.Error) as e:
                c.devices()
        self.assertEqual(e.exception.code, "UNAVAILABLE")


class CAbiTest(unittest.TestCase):
    """libtransposed_launch.so through ctypes: host-side checks, no GPU needed."""

    def test_library_version_matches_the_daemon(self):
        lib = transposed.load_library()
        self.assertEqual(lib.transposed_c_api_version(), 1)
        if os.environ.get("TRANSPOSED_SERVER"):
            devices = transposed.Client(timeout=60).devices()
            self.assertEqual(lib.transposed_library_version().decode(),
                             devices[0].library_version)

    def test_check(self):
        transposed.check("tile32x32.rows8.pad1", "f32", 100, 70)
        transposed.check("naive", "c128", 3, 5, batch=2, ld_in=9, ld_out=4)
        with self.assertRaises(transposed.Error) as e:
            transposed.check("tile33x7", "f32", 100, 70)
        self.assertEqual(e.exception.code, "INVALID_ARGUMENT")
        with self.assertRaises(transposed.Error) as e:
            transposed.check("naive", "f99", 100, 70)
        self.assertIn("dtype", e.exception.message)
        with self.assertRaises(transposed.Error) as e:
            transposed.check("naive", "f32", 100, 70, ld_in=10)
        self.assertIn("ld_in", e.exception.message)

    def test_prepared_handles_are_made_once_per_device_problem_and_variant(self):
        from transposed import _launch
        transposed.clear_cache()
        lib = transposed.load_library()
        h = _launch.prepared_handle(0, "tile32x32.rows8.pad1", "f32", 100, 70)
        self.assertTrue(h)
        self.assertEqual(_launch.prepared_handle(0, "tile32x32.rows8.pad1", "f32", 100, 70), h)
        self.assertEqual(lib.transposed_prepared_variant(h).decode(), "tile32x32.rows8.pad1")
        others = {_launch.prepared_handle(1, "tile32x32.rows8.pad1", "f32", 100, 70),
                  _launch.prepared_handle(0, "naive", "f32", 100, 70),
                  _launch.prepared_handle(0, "tile32x32.rows8.pad1", "f32", 100, 70, ld_in=80),
                  _launch.prepared_handle(0, "tile32x32.rows8.pad1", "i32", 100, 70)}
        self.assertNotIn(h, others)
        self.assertEqual(len(others), 4)
        self.assertEqual(len(_launch._handles), 5)
        self.assertEqual(lib.transposed_prepared_alignment(
            _launch.prepared_handle(0, "naive", "c128", 3, 5, batch=2)), 16)
        with self.assertRaises(transposed.Error) as e:
            _launch.prepared_handle(0, "tile33x7", "f32", 100, 70)
        self.assertEqual(e.exception.code, "INVALID_ARGUMENT")
        with self.assertRaises(transposed.Error) as e:
            _launch.prepared_handle(-1, "naive", "f32", 100, 70)
        self.assertIn("device", e.exception.message)
        self.assertEqual(len(_launch._handles), 6)
        transposed.clear_cache()
        self.assertEqual(len(_launch._handles), 0)
        # A bounded number of handles: past MAX_HANDLES all are freed and made again as needed.
        old, _launch.MAX_HANDLES = _launch.MAX_HANDLES, 3
        try:
            for rows in range(10, 20):
                _launch.prepared_handle(0, "naive", "f32", rows, 7)
                self.assertLessEqual(len(_launch._handles), 3)
        finally:
            _launch.MAX_HANDLES = old
            transposed.clear_cache()

    def test_launch_of_a_prepared_handle_checks_pointers_first(self):
        from transposed import _launch
        lib = transposed.load_library()
        h = _launch.prepared_handle(0, "tile32x32.rows8.pad1", "f32", 100, 70)
        rc = _launch._launch_fn(h, 0, 1 << 20, 0)
        self.assertEqual(rc, 3 if lib.transposed_has_cuda() else 12)
        if lib.transposed_has_cuda():
            self.assertIn("null", _launch.launch_error(rc).message)
        rc = _launch._launch_fn(None, 1 << 20, 1 << 24, 0)
        self.assertEqual(_launch.launch_error(rc).code, "INVALID_ARGUMENT")

    def test_layouts_the_kernels_serve(self):
        from transposed._launch import layout, out_layout
        self.assertEqual(layout((100, 70), (70, 1)), ("kernel", 100, 70, 1, 70))
        self.assertEqual(layout((100, 70), (80, 1)), ("kernel", 100, 70, 1, 80))  # column slice
        self.assertEqual(layout((4, 100, 70), (7000, 70, 1)), ("kernel", 100, 70, 4, 70))
        # Leading dims merge into one batch when they follow each other.
        self.assertEqual(layout((2, 3, 10, 8), (240, 80, 8, 1)), ("kernel", 10, 8, 6, 8))
        self.assertEqual(layout((2, 1, 10, 8), (80, 5, 8, 1)), ("kernel", 10, 8, 2, 8))
        self.assertEqual(layout((2, 3, 10, 8), (400, 80, 8, 1)), ("framework",))
        self.assertEqual(layout((4, 100, 70), (8000, 70, 1)), ("framework",))  # batch gaps
        # One row: any batch stride of at least a row is the row stride.
        self.assertEqual(layout((5, 1, 70), (100, 70, 1)), ("kernel", 1, 70, 5, 100))
        self.assertEqual(layout((100, 1), (3, 1)), ("kernel", 100, 1, 1, 3))
        # x.t() of a row-major matrix: its transpose is a copy of its storage.
        self.assertEqual(layout((70, 100), (1, 70)), ("copy",))
        self.assertEqual(layout((70, 100), (1, 80)), ("copy",))
        self.assertEqual(layout((100, 70), (140, 2)), ("framework",))  # every other column
        self.assertEqual(layout((0, 70), (70, 1)), ("framework",))
        with self.assertRaises(ValueError):
            layout((70,), (1,))
        self.assertEqual(out_layout((70, 100), (100, 1), 100, 70, 1), 0)
        self.assertEqual(out_layout((70, 100), (128, 1), 100, 70, 1), 128)
        self.assertIsNone(out_layout((70, 100), (1, 70), 100, 70, 1))

    def test_transpose_rejects_what_is_not_a_cuda_array(self):
        with self.assertRaises(TypeError):
            transposed.transpose([[1, 2], [3, 4]])


if __name__ == "__main__":
    unittest.main()
