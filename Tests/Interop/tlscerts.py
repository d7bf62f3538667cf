"""A throwaway certificate authority and server certificates for the TLS tests, made with the
openssl command-line tool (OpenSSL 3), for 127.0.0.1 and localhost."""
import os
import subprocess
import tempfile


def run(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


class Authority:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="parley-tls-")
        self.key = os.path.join(self.dir, "ca.key")
        self.cert = os.path.join(self.dir, "ca.pem")
        run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
            "-subj", "/CN=Parley Test CA", "-keyout", self.key, "-out", self.cert,
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
        self.count = 0

    def issue(self, name="server", key_type="ec"):
        """A leaf certificate for 127.0.0.1 and localhost: (certificate chain file, key file).
        `key_type` "rsa" makes an RSA key (what static-RSA key exchange would need)."""
        self.count += 1
        key = os.path.join(self.dir, f"{name}{self.count}.key")
        request = os.path.join(self.dir, f"{name}{self.count}.csr")
        cert = os.path.join(self.dir, f"{name}{self.count}.pem")
        extensions = os.path.join(self.dir, f"{name}{self.count}.ext")
        with open(extensions, "w") as file:
            file.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
        key_options = ["-newkey", "rsa:2048"] if key_type == "rsa" else ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
        run("req", *key_options, "-nodes", "-subj", f"/CN={name} {self.count}", "-keyout", key, "-out", request)
        run("x509", "-req", "-in", request, "-CA", self.cert, "-CAkey", self.key, "-CAcreateserial", "-days", "2",
            "-extfile", extensions, "-out", cert)
        return cert, key
