"""The Python client's connection options against real daemons this test starts itself
($TRANSPOSED_DAEMON, CPU backend, temporary directory): the admin token (token_file, token,
$TRANSPOSED_TOKEN_FILE) against --admin-token-file, TLS (tls_ca, tls_server_name) and mutual TLS
(tls_cert, tls_key) against --tls-cert/--tls-key/--tls-client-ca. Certificates are made with the
openssl command, as server/e2e/security_e2e_test.cc does."""
import os
import shutil
import subprocess
import tempfile
import time
import unittest
from unittest import mock

import transposed

TOKEN = "s3cret-admin-token-0123456789"


def start_daemon(workdir, name, *args):
    """Starts the daemon on an ephemeral loopback port; returns (process, "127.0.0.1:PORT")."""
    port_file = os.path.join(workdir, f"{name}.port")
    log = open(os.path.join(workdir, f"{name}.log"), "w")
    proc = subprocess.Popen([os.environ["TRANSPOSED_DAEMON"], "--listen", "127.0.0.1:0",
                             "--port-file", port_file, "--backend", "cpu", "--tune-budget", "2",
                             "--db", os.path.join(workdir, f"{name}.db"), *args],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while not (os.path.exists(port_file) and os.path.getsize(port_file) > 0):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"{name} did not start: "
                               + open(os.path.join(workdir, f"{name}.log")).read())
        time.sleep(0.05)
    return proc, "127.0.0.1:" + open(port_file).read().strip()


def stop_daemon(proc):
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def make_certificates(d):
    ssl = "openssl req -newkey rsa:2048 -nodes"
    script = f"""set -e; cd {d}; exec 2>openssl.log
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > server.ext
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=test-ca
{ssl} -keyout server.key -out server.csr -subj /CN=localhost
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
  -extfile server.ext -out server.pem
{ssl} -keyout client.key -out client.csr -subj /CN=batch-job
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -out client.pem
"""
    subprocess.run(["sh", "-c", script], check=True)


@unittest.skipUnless(os.environ.get("TRANSPOSED_DAEMON"), "TRANSPOSED_DAEMON is not set")
class TokenTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="transposed-pytoken.")
        cls.token_file = os.path.join(cls.dir, "token")
        with open(cls.token_file, "w") as f:
            f.write(TOKEN + "\n")
        cls.proc, cls.address = start_daemon(cls.dir, "token", "--admin-token-file",
                                             cls.token_file)

    @classmethod
    def tearDownClass(cls):
        stop_daemon(cls.proc)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_admin_calls_need_the_token(self):
        with mock.patch.dict(os.environ, {"TRANSPOSED_TOKEN_FILE": ""}):
            with transposed.Client(self.address, timeout=60) as c:
                self.assertEqual(len(c.devices()), 1)  # lookups are open
                with self.assertRaises(transposed.Error) as e:
                    c.delete(all=True)
                self.assertEqual(e.exception.code, "UNAUTHENTICATED")
            with transposed.Client(self.address, timeout=60, token="wrong-token-0123456789") as c:
                with self.assertRaises(transposed.Error) as e:
                    list(c.tune(40, 24, "u8", budget_seconds=1))
                self.assertEqual(e.exception.code, "UNAUTHENTICATED")
        with transposed.Client(self.address, timeout=60, token_file=self.token_file) as c:
            answers = [p for p in c.tune(40, 24, "u8", budget_seconds=1)
                       if p.WhichOneof("event") == "answer"]
            self.assertEqual(len(answers), 1)
            self.assertEqual(c.delete(all=True), 1)
        with transposed.Client(self.address, timeout=60, token=TOKEN) as c:
            self.assertEqual(c.delete(all=True), 0)

    def test_token_file_from_the_environment_as_transposectl(self):
        with mock.patch.dict(os.environ, {"TRANSPOSED_TOKEN_FILE": self.token_file,
                                          "TRANSPOSED_SERVER": self.address}):
            with transposed.Client(timeout=60) as c:
                self.assertEqual(c.address, self.address)
                self.assertGreaterEqual(c.delete(all=True), 0)

    def test_bad_token_options(self):
        with self.assertRaises(ValueError):
            transposed.Client(self.address, token=TOKEN, token_file=self.token_file)
        with self.assertRaises(ValueError) as e:
            transposed.Client(self.address, token_file=os.path.join(self.dir, "missing"))
        self.assertIn("token_file", str(e.exception))


@unittest.skipUnless(os.environ.get("TRANSPOSED_DAEMON"), "TRANSPOSED_DAEMON is not set")
@unittest.skipUnless(shutil.which("openssl"), "no openssl command")
class TlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="transposed-pytls.")
        make_certificates(cls.dir)
        p = lambda n: os.path.join(cls.dir, n)  # noqa: E731
        cls.ca, cls.cert, cls.key = p("ca.pem"), p("client.pem"), p("client.key")
        cls.tls, cls.tls_address = start_daemon(cls.dir, "tls", "--tls-cert", p("server.pem"),
                                                "--tls-key", p("server.key"))
        cls.mtls, cls.mtls_address = start_daemon(
            cls.dir, "mtls", "--tls-cert", p("server.pem"), "--tls-key", p("server.key"),
            "--tls-client-ca", p("ca.pem"))

    @classmethod
    def tearDownClass(cls):
        stop_daemon(cls.tls)
        stop_daemon(cls.mtls)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_tls_with_the_daemons_ca(self):
        with transposed.Client(self.tls_address, timeout=30, tls_ca=self.ca) as c:
            self.assertEqual(len(c.devices()), 1)
        # The certificate names localhost and 127.0.0.1; another name must not match.
        with transposed.Client(self.tls_address, timeout=10, tls_ca=self.ca,
                               tls_server_name="elsewhere") as c:
            with self.assertRaises(transposed.Error) as e:
                c.devices()
            self.assertEqual(e.exception.code, "UNAVAILABLE")
        with transposed.Client(self.tls_address, timeout=10) as c:  # plaintext to a TLS daemon
            with self.assertRaises(transposed.Error) as e:
                c.devices()
            self.assertEqual(e.exception.code, "UNAVAILABLE")

    def test_mutual_tls_needs_the_client_certificate(self):
        with transposed.Client(self.mtls_address, timeout=30, tls_ca=self.ca,
                               tls_cert=self.cert, tls_key=self.key,
                               tls_server_name="localhost") as c:
            self.assertEqual(len(c.devices()), 1)
            # A verified client certificate is an admin (no token file on this daemon).
            self.assertEqual(c.delete(all=True), 0)
        with transposed.Client(self.mtls_address, timeout=10, tls_ca=self.ca) as c:
            with self.assertRaises(transposed.Error) as e:
                c.devices()
            self.assertEqual(e.exception.code, "UNAVAILABLE")

    def test_bad_tls_options(self):
        with self.assertRaises(ValueError):
            transposed.Client(self.mtls_address, tls_cert=self.cert)  # no key
        with self.assertRaises(ValueError) as e:
            transposed.Client(self.mtls_address, tls_ca=os.path.join(self.dir, "missing.pem"))
        self.assertIn("tls_ca", str(e.exception))


if __name__ == "__main__":
    unittest.main()
