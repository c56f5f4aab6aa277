//! `regent tls gen-dev-ca` (docs/design.md#issue-24, first TLS step): the files it writes,
//! their modes, that they load as a node's mutual-TLS material, and that it
//! refuses to replace a CA.

mod support;

use regent_std::tls::TlsMaterial;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;
use support::cluster::Cluster;

#[test]
fn gen_dev_ca_writes_a_ca_and_node_certificates_that_load_and_refuses_to_replace_them() {
    let c = Cluster::new("tls-material");
    let out = c.path("tls");
    let dir = out.to_str().unwrap();
    let args = ["tls", "gen-dev-ca", "--out", dir, "--cluster", "c1"];
    let mut first = args.to_vec();
    first.extend(["--node", "127.0.0.1", "--node", "w1"]);
    let run = c.run(&first, Duration::from_secs(60));
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));

    for (file, mode) in [
        ("ca.pem", 0o644),
        ("ca-key.pem", 0o600),
        ("127.0.0.1.pem", 0o644),
        ("127.0.0.1-key.pem", 0o600),
        ("w1.pem", 0o644),
        ("w1-key.pem", 0o600),
    ] {
        let meta = std::fs::metadata(out.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(meta.permissions().mode() & 0o777, mode, "{file}");
    }
    for node in ["127.0.0.1", "w1"] {
        let m = TlsMaterial::load(
            &out.join(format!("{node}.pem")),
            &out.join(format!("{node}-key.pem")),
            &out.join("ca.pem"),
        )
        .unwrap_or_else(|e| panic!("{node}: {e}"));
        m.server_config().expect("a server configuration");
        m.client_config().expect("a client configuration");
    }

    let mut again = args.to_vec();
    again.extend(["--node", "w2"]);
    let run = c.run(&again, Duration::from_secs(60));
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("already holds a ca.pem"), "{stderr}");
    assert!(!out.join("w2.pem").exists(), "nothing written on refusal");
}
