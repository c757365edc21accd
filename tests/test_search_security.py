"""A search's Dask scheduler is secure by default: a plain tcp:// scheduler off this machine is refused unless the
user says so, and a TLS scheduler admits only clients with its credentials (owner-only files written by
``python -m fairnas.search.security``); the search runs with them."""

from __future__ import annotations

import shutil
import stat

import pytest

from fairnas.search import run_search
from fairnas.search.security import check_address, cluster_security, make_credentials, tls_security
from tests.test_search_parallel import ZDT1, zdt1_settings

needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")


@pytest.mark.parametrize(
    ("address", "refused"),
    [
        ("tcp://10.255.255.1:8786", True),
        ("node17:8786", True),  # a host name may resolve anywhere
        ("tcp://127.0.0.1:8786", False),
        ("localhost:8786", False),
        ("tcp://[::1]:8786", False),
        ("tls://10.255.255.1:8786", False),
    ],
)
def test_a_plain_scheduler_off_this_machine_needs_an_explicit_yes(address, refused):
    if refused:
        with pytest.raises(ValueError, match=rf"^dask_address={address}: a scheduler without TLS off this machine"):
            check_address(address, insecure=False, tls="credentials")
    else:
        check_address(address, insecure=False, tls="credentials")
    check_address(address, insecure=True, tls="credentials")  # the user's explicit choice


def test_a_tls_scheduler_without_credentials_is_refused_naming_dask_tls():
    with pytest.raises(ValueError, match=r"^dask_address=tls://10.0.0.5:8786: .* dask_tls is not set; set dask_tls"):
        check_address("tls://10.0.0.5:8786", insecure=True)


def test_a_search_refuses_it_in_one_line_before_anything_is_written(tmp_path):
    settings = zdt1_settings(strategy="random", n_trials=2, n_workers=1, dask_address="tcp://10.255.255.1:8786")
    with pytest.raises(ValueError, match="dask_insecure=true"):
        run_search(ZDT1, ZDT1.configspace(), settings, output_dir=tmp_path / "search")
    assert not (tmp_path / "search").exists()


@needs_openssl
def test_credentials_are_written_for_their_owner_only_and_checked(tmp_path):
    folder = make_credentials(tmp_path / "tls")
    assert sorted(path.name for path in folder.iterdir()) == ["ca.pem", "cert.pem", "key.pem"]
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and stat.S_IMODE((folder / "key.pem").stat().st_mode) == 0o600
    assert tls_security(folder).require_encryption
    (folder / "key.pem").chmod(0o644)
    with pytest.raises(ValueError, match="key.pem is readable by others"):
        tls_security(folder)
    with pytest.raises(ValueError, match=r"\['ca.pem', 'cert.pem', 'key.pem'\] missing"):
        tls_security(tmp_path / "empty")


@needs_openssl
def test_a_tls_scheduler_refuses_other_credentials_and_runs_the_search_with_its_own(tmp_path):
    import dask
    from distributed import Client, LocalCluster

    ours, theirs = make_credentials(tmp_path / "ours"), make_credentials(tmp_path / "theirs")
    with (
        dask.config.set({"distributed.worker.daemon": False}),
        LocalCluster(
            n_workers=2, threads_per_worker=1, protocol="tls://", host="127.0.0.1", security=cluster_security(ours),
            dashboard_address=":0",
        ) as cluster,
    ):  # fmt: skip
        address = cluster.scheduler_address
        assert address.startswith("tls://127.0.0.1:")
        with pytest.raises((OSError, TimeoutError)):  # mutual TLS: a certificate of another authority is refused
            Client(address, security=tls_security(theirs), timeout=5)
        settings = zdt1_settings(strategy="random", n_trials=4, n_workers=1, dask_address=address, dask_tls=str(ours))
        result = run_search(ZDT1, ZDT1.configspace(), settings, output_dir=tmp_path / "search")
        assert len(result.trials) == 4 and (result.trials["status"] == "success").all()
