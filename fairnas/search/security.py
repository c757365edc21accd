"""Who may talk to a search's Dask scheduler: TLS with credentials only their owner can read.

A Dask scheduler runs whatever its clients send, so one listening on a cluster network without TLS lets anyone who
reaches its port run code as the researcher, on nodes that hold their data and their W&B key. A search therefore
refuses a plain ``tcp://`` scheduler off this machine unless told so (``dask_insecure``), and connects with the
TLS credentials of a folder (``dask_tls``): ``ca.pem`` (the certificate authority every party trusts), ``cert.pem``
and ``key.pem`` (the certificate the scheduler, the workers and the search all present; mutual TLS, so a client
without them is refused). ``python -m fairnas.search.security <folder>`` writes such a folder with OpenSSL, readable
by its owner only; the scheduler and workers take the same files (docs/scale.md).
"""

from __future__ import annotations

import argparse
import ipaddress
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

CREDENTIALS = ("ca.pem", "cert.pem", "key.pem")


def check_address(address: str, *, insecure: bool, tls: str | None = None, where: str | None = None) -> None:
    """Refuse a ``tls://`` scheduler address without the credentials folder ``tls``, and a plain ``tcp://`` (or
    scheme-less) one off the loopback unless ``insecure``; ``where`` names the setting the address came from (default
    ``dask_address=<address>``)."""
    where = where or f"dask_address={address}"
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if parts.scheme == "tls" and tls is None:
        raise ValueError(
            f"{where}: a tls:// scheduler needs TLS credentials and dask_tls is not set; set dask_tls to the folder "
            f"of its {', '.join(CREDENTIALS)} (python -m fairnas.search.security <folder> writes them)"
        )
    if parts.scheme != "tcp" or insecure or _is_loopback(parts.hostname or ""):
        return
    raise ValueError(
        f"{where}: a scheduler without TLS off this machine runs code for anyone who reaches its port; "
        "start it with TLS (tls://, dask_tls=<credentials folder>: python -m fairnas.search.security) or set "
        "dask_insecure=true on a network only you can reach"
    )


def tls_security(folder: str | Path) -> Any:
    """A ``distributed.Security`` requiring TLS with the credentials in ``folder``, checked first: every file
    present, the key readable by its owner only."""
    from distributed.security import Security

    folder = Path(folder).expanduser()
    missing = [name for name in CREDENTIALS if not (folder / name).is_file()]
    if missing:
        raise ValueError(
            f"dask_tls={folder}: {missing} missing; python -m fairnas.search.security {folder} writes them"
        )
    if (folder / "key.pem").stat().st_mode & 0o077:
        raise ValueError(f"dask_tls={folder}: key.pem is readable by others; chmod 600 {folder / 'key.pem'}")
    ca, cert, key = (str(folder / name) for name in CREDENTIALS)
    return Security(tls_ca_file=ca, tls_client_cert=cert, tls_client_key=key, require_encryption=True)


def cluster_security(folder: str | Path) -> Any:
    """The ``distributed.Security`` of a whole cluster started from Python (dask-jobqueue's ``SLURMCluster``, a
    ``LocalCluster``): the scheduler, its workers and its clients all present the folder's certificate, checked as
    :func:`tls_security` checks it; pass it as ``security=`` with ``protocol="tls://"``."""
    from distributed.security import Security

    tls_security(folder)
    ca, cert, key = (str(Path(folder).expanduser() / name) for name in CREDENTIALS)
    roles = {f"tls_{role}_cert": cert for role in ("client", "scheduler", "worker")}
    roles |= {f"tls_{role}_key": key for role in ("client", "scheduler", "worker")}
    return Security(tls_ca_file=ca, require_encryption=True, **roles)


def make_credentials(folder: str | Path, days: int = 365) -> Path:
    """A certificate authority and one certificate it signed (for the scheduler, the workers and the search) in
    ``folder``, which only its owner can enter; the authority's own key is not kept."""
    folder = Path(folder).expanduser()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    with tempfile.TemporaryDirectory(dir=folder) as scratch:
        ca_key, request = Path(scratch) / "ca.key", Path(scratch) / "request.csr"
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", folder / "ca.pem",
                 "-days", str(days), "-subj", "/CN=fairnas Dask CA")  # fmt: skip
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", folder / "key.pem", "-out", request,
                 "-subj", "/CN=fairnas Dask")  # fmt: skip
        _openssl("x509", "-req", "-in", request, "-CA", folder / "ca.pem", "-CAkey", ca_key, "-CAcreateserial",
                 "-CAserial", Path(scratch) / "ca.srl", "-out", folder / "cert.pem", "-days", str(days))  # fmt: skip
    (folder / "key.pem").chmod(0o600)
    return folder


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve anywhere
        return False


def _openssl(*arguments: object) -> None:
    try:
        subprocess.run(["openssl", *map(str, arguments)], check=True, capture_output=True, text=True)
    except FileNotFoundError:
        raise ValueError("openssl is not installed; install it (e.g. apt-get install openssl)") from None
    except subprocess.CalledProcessError as error:
        raise ValueError(f"openssl {arguments[0]} failed: {error.stderr.strip().splitlines()[-1]}") from None


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m fairnas.search.security", description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="where ca.pem, cert.pem and key.pem go (created owner-only)")
    parser.add_argument("--days", type=int, default=365, help="how long the certificates are valid")
    args = parser.parse_args(argv)
    print(make_credentials(args.folder, args.days))


if __name__ == "__main__":
    main()
