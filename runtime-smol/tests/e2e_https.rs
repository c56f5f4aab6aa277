//! End-to-end: a master with TLS material serves its HTTP face over HTTPS
//! (docs/design.md#issue-24): `/api/state` and `/metrics` answer a client trusting the
//! cluster's CA; a plain-HTTP request and a client trusting another CA get
//! nothing. Real `regent` processes on loopback; bounded waits.

mod support;

use regent_std::tls::{DevCa, Validity};
use std::time::Duration;
use support::cluster::{http_get, https_get, wait_for, Cluster, MasterSpec};

const BOUND: Duration = Duration::from_secs(60);

#[test]
fn a_tls_master_serves_https_to_its_ca_and_nothing_in_plain_http() {
    let c = Cluster::new("https");
    let ca = DevCa::new("regent").unwrap();
    let node = ca.issue(&["127.0.0.1".to_string()], Validity::Open).unwrap();
    let (cert, key, ca_file) = (c.path("m1.pem"), c.path("m1-key.pem"), c.path("ca.pem"));
    std::fs::write(&cert, &node.cert_pem).unwrap();
    std::fs::write(&key, &node.key_pem).unwrap();
    std::fs::write(&ca_file, ca.cert_pem()).unwrap();
    let (cert, key, ca_path) =
        (cert.to_str().unwrap(), key.to_str().unwrap(), ca_file.to_str().unwrap());
    let spec = MasterSpec::new(
        "m1",
        &["--recovery", "none", "--tls-cert", cert, "--tls-key", key, "--tls-ca", ca_path],
    );
    let mut master = c.master(&spec);
    let http = spec.http_addr();
    let ca_pem = ca.cert_pem();

    let state = wait_for(BOUND, "/api/state over HTTPS", || {
        match https_get(&http, "/api/state", &ca_pem) {
            Ok((200, body)) => {
                serde_json::from_str::<serde_json::Value>(&body).map_err(|e| e.to_string())
            }
            other => Err(format!("{other:?}")),
        }
    });
    assert_eq!(state["id"], "m1", "{state}");
    let (code, metrics) = https_get(&http, "/metrics", &ca_pem).unwrap();
    assert_eq!(code, 200);
    assert!(metrics.contains("regent_master_status"), "{metrics}");

    // Plain HTTP on the HTTPS port: no page.
    assert!(
        !matches!(http_get(&http, "/api/state"), Some((200, _))),
        "a plain-HTTP request must not be answered"
    );
    // A client trusting another CA refuses the master's certificate.
    let other = DevCa::new("regent").unwrap().cert_pem();
    let err = https_get(&http, "/api/state", &other).unwrap_err();
    assert!(err.contains("invalid peer certificate"), "{err}");
    master.assert_running("after the refused requests");
}
