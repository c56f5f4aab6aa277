//! End-to-end: records sealed under the cluster secret, at the daemon.
//!
//! * Filesystem: a store written without a secret is refused by a master
//!   with one (naming the record and the seal command); `regent store seal`
//!   refuses it too unless told `--accept-unsealed`, then seals it and the
//!   master with the secret recovers its worker from it; a record planted
//!   without the secret is refused by name and the master exits; a rotation
//!   (new secret plus `--previous-secret-file`) re-seals the store.
//! * ZooKeeper: with a secret no unauthenticated session can read or write
//!   `<root>/state` children or election nodes; a store written without a
//!   secret is refused by the loading leader, sealed offline with
//!   `regent store seal --zk` (which also closes its ACLs), and then led.
//!
//! Real `regent` processes and a real ZooKeeper server on loopback.

mod support;

use regent_core::store::format;
use regent_core::store::{FrameworkRecord, GroupRecord, Record, SlotOutcome};
use regent_core::zk::layout;
use regent_smol::zk::digest_credentials;
use std::path::Path;
use std::time::Duration;
use support::cluster::{alive_with_workers, api_state, unique, wait_for, Cluster, MasterSpec};
use support::zk_server::ZkServer;
use zookeeper_client as zkc;

const BOUND: Duration = Duration::from_secs(60);

fn secret_file(c: &Cluster, name: &str, text: &str) -> String {
    let path = c.path(name);
    std::fs::write(&path, format!("{text}\n")).unwrap();
    path.to_str().unwrap().to_owned()
}

fn state_of(spec: &MasterSpec) -> Result<serde_json::Value, String> {
    api_state(&spec.http_addr()).ok_or_else(|| format!("{} does not answer /api/state", spec.id))
}

/// A framework record someone without the secret writes into the store: its
/// command would run on every worker.
fn planted() -> Record {
    Record::Framework(FrameworkRecord {
        id: regent_core::FrameworkId::new("evil"),
        name: "planted".into(),
        failover_timeout_ms: 600_000,
        groups: vec![GroupRecord {
            replacing: Default::default(),
            preempted: Default::default(),
            counted: Default::default(),
            deployment: None,
            eras: Vec::new(),
            spec: regent_core::protocol::GroupSpec {
                group: "main".into(),
                slots: 1,
                command: vec!["sh".into(), "-c".into(), "touch /tmp/regent-pwned".into()],
                env: vec![],
                cores: 1,
                memory_mb: 16,
                policy: Default::default(),
                launch: Default::default(),
            },
            slots: vec![SlotOutcome::Pending],
            retries_used: 0,
            restarts: Default::default(),
        }],
        callback: None,
        registered_at_ms: None,
        job: None,
        tenant: None,
    })
}

/// The key id each record file of `dir` is sealed under (`None`: unsealed).
fn seals(dir: &Path) -> Vec<(String, Option<Vec<u8>>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rec"))
        .map(|p| {
            let img = std::fs::read(&p).unwrap();
            let id = (img[4..6] == [0, 2]).then(|| img[6..14].to_vec());
            (p.file_name().unwrap().to_string_lossy().into_owned(), id)
        })
        .collect();
    v.sort();
    v
}

fn text(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn filesystem_store_sealing_planting_and_rotation() {
    let c = Cluster::new("sealed-fs");
    let store = c.path("store");
    let store_arg = store.to_str().unwrap().to_owned();
    let old = secret_file(&c, "secret-old", "the old cluster secret of this test");
    let new = secret_file(&c, "secret-new", "the new cluster secret of this test");
    let plain = MasterSpec::new("m1", &["--recovery", "filesystem", "--store", &store_arg]);
    let with = |secret: &str, extra: &[&str]| {
        let mut spec = plain.clone();
        spec.args.extend(["--secret-file".to_owned(), secret.to_owned()]);
        spec.args.extend(extra.iter().map(|s| s.to_string()));
        spec
    };

    // 1. A store written without a secret.
    {
        let mut m = c.master(&plain);
        let mut w = c.worker("w1", &[plain.addr()], 1, 128, &[]);
        wait_for(BOUND, "w1 registered", || alive_with_workers(&state_of(&plain)?, &["w1"]));
        w.stop(Duration::from_secs(10));
        m.stop(Duration::from_secs(10));
    }
    assert!(seals(&store).iter().all(|(_, id)| id.is_none()), "{:?}", seals(&store));

    // 2. A master with a secret refuses it, naming the records and the fix.
    let spec = with(&old, &[]);
    let mut m = c.master(&spec);
    let status = m.wait_exit(BOUND);
    assert!(!status.success(), "a master with a secret must refuse unsealed records");
    let err = m.stderr();
    assert!(err.contains("w-w1.rec: not sealed"), "{err}");
    assert!(err.contains("regent store seal --accept-unsealed"), "{err}");

    // 3. `store seal` wants the operator's word for unsealed records.
    let out = c.run(&["--secret-file", &old, "store", "seal", &store_arg], BOUND);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("w-w1.rec: not sealed"), "{}", text(&out));
    let out =
        c.run(&["--secret-file", &old, "store", "seal", &store_arg, "--accept-unsealed"], BOUND);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("sealed worker/w1 (was unsealed)"), "{}", text(&out));
    let sealed = seals(&store);
    let old_id = sealed[0].1.clone().expect("sealed");
    assert!(sealed.iter().all(|(_, id)| id.as_ref() == Some(&old_id)), "{sealed:?}");
    // Idempotent: nothing left to seal.
    let out = c.run(&["--secret-file", &old, "store", "seal", &store_arg], BOUND);
    assert!(text(&out).contains(" 0 re-sealed"), "{}", text(&out));

    // 4. The master with the secret recovers its worker from the sealed store.
    {
        let mut m = c.master(&spec);
        let mut w = c.worker("w1", &[spec.addr()], 1, 128, &["--secret-file", &old]);
        wait_for(BOUND, "w1 recovered by the sealed master", || {
            alive_with_workers(&state_of(&spec)?, &["w1"])
        });
        w.stop(Duration::from_secs(10));
        m.stop(Duration::from_secs(10));
    }

    // 5. A record planted without the secret is refused by name; the master
    //    exits rather than launch its command.
    let evil = store.join("f-evil.rec");
    std::fs::write(&evil, format::encode(&planted()).unwrap()).unwrap();
    let mut m = c.master(&spec);
    let status = m.wait_exit(BOUND);
    assert!(!status.success());
    let err = m.stderr();
    assert!(err.contains(&format!("record {}: not sealed", evil.display())), "{err}");
    // The same record sealed under some other secret: refused as well.
    let other = regent_core::store::seal::Sealing::with_secret(
        &regent_core::secret::Secret::new(b"a secret the attacker made up".to_vec()).unwrap(),
    );
    std::fs::write(&evil, format::encode_with(&planted(), &other).unwrap()).unwrap();
    let mut m = c.master(&spec);
    assert!(!m.wait_exit(BOUND).success());
    assert!(m.stderr().contains("f-evil.rec: sealed under record key"), "{}", m.stderr());
    std::fs::remove_file(&evil).unwrap();

    // 6. Rotation: the new secret with the old one as previous reads the
    //    store and re-seals it; afterwards the new secret alone suffices.
    let rotating = with(&new, &["--previous-secret-file", &old]);
    {
        let mut m = c.master(&rotating);
        wait_for(BOUND, "the rotating master ALIVE", || {
            let s = state_of(&rotating)?;
            if s["status"] == "ALIVE" {
                Ok(())
            } else {
                Err(format!("status {}", s["status"]))
            }
        });
        m.stop(Duration::from_secs(10));
    }
    let resealed = seals(&store);
    assert!(resealed.iter().all(|(_, id)| id.is_some() && *id != Some(old_id.clone())));
    let out = c.run(&["--secret-file", &new, "store", "check", &store_arg], BOUND);
    assert!(out.status.success(), "{}", text(&out));
    let out = c.run(&["--secret-file", &old, "store", "check", &store_arg], BOUND);
    assert!(!out.status.success(), "the old secret no longer verifies: {}", text(&out));
}

async fn connect(addr: &str, auth: Option<Vec<u8>>) -> zkc::Client {
    let mut c = zkc::Client::connector().with_session_timeout(Duration::from_secs(4));
    if let Some(a) = auth {
        c = c.with_auth("digest", &a);
    }
    c.connect(addr).await.expect("a ZooKeeper session")
}

#[test]
fn zookeeper_nodes_are_closed_to_strangers_and_an_old_store_is_sealed_offline() {
    let zk = ZkServer::start();
    let c = Cluster::new("sealed-zk");
    let root = format!("/{}", unique("sealed"));
    let secret_text = "the zookeeper cluster secret of this test";
    let secret = secret_file(&c, "secret", secret_text);
    let zk_addr = zk.addr();
    let zk_args = |with_secret: bool| {
        let mut a = vec![
            "--recovery".to_owned(),
            "zookeeper".into(),
            "--zk".into(),
            zk_addr.clone(),
            "--zk-root".into(),
            root.clone(),
            "--zk-session-timeout".into(),
            "3000".into(),
        ];
        if with_secret {
            a.extend(["--secret-file".to_owned(), secret.clone()]);
        }
        a
    };
    let spec_with = |id: &str, with_secret: bool| {
        let mut s = MasterSpec::new(id, &[]);
        s.args = zk_args(with_secret);
        s
    };
    let alive = |spec: &MasterSpec| {
        let s = state_of(spec)?;
        if s["status"] == "ALIVE" {
            Ok(())
        } else {
            Err(format!("status {}", s["status"]))
        }
    };
    let state = format!("{root}/state");
    let election = format!("{root}/election");
    // w1's record node, in its shard.
    let w1_node = layout::stem_path(&state, "w-w1");

    // 1. A cluster without a secret leaves unsealed records, open to all.
    let plain = spec_with("m0", false);
    {
        let mut m = c.master(&plain);
        let mut w = c.worker("w1", &[plain.addr()], 1, 128, &[]);
        wait_for(BOUND, "w1 registered", || alive_with_workers(&state_of(&plain)?, &["w1"]));
        w.stop(Duration::from_secs(10));
        m.stop(Duration::from_secs(10));
    }

    // 2. A master with the secret refuses the unsealed store by name (it
    //    gives the leadership up and keeps trying; it never leads on it).
    let spec = spec_with("m1", true);
    {
        let mut m = c.master(&spec);
        wait_for(BOUND, "the refusal in the log", || {
            let err = m.stderr();
            if err.contains(&format!("record {w1_node}: not sealed")) {
                Ok(())
            } else {
                Err(support::cluster::tail(&err, 5))
            }
        });
        assert_ne!(state_of(&spec).map(|s| s["status"].clone()).ok(), Some("ALIVE".into()));
        // It does not spin through the election over it: after an
        // immediate retry it rejoins 1 s, 2 s, 4 s... apart. (Without the
        // backoff it gave up hundreds of times a second.) A rate needs a
        // window: 4 s of log.
        let give_ups =
            |m: &support::cluster::Proc| m.stderr().matches("giving up leadership").count();
        let before = give_ups(&m);
        std::thread::sleep(Duration::from_secs(4));
        let during = give_ups(&m) - before;
        assert!(during <= 4, "{during} give-ups in 4 s: the master spins on the damaged store");
        m.stop(Duration::from_secs(10));
    }

    // 3. Sealed offline: refused without the operator's word, then done.
    let seal = |extra: &[&str]| {
        let mut args =
            vec!["--secret-file", &secret, "store", "seal", "--zk", &zk_addr, "--zk-root", &root];
        args.extend_from_slice(extra);
        c.run(&args, BOUND)
    };
    let out = seal(&[]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("nothing was written"), "{}", text(&out));
    let out = seal(&["--accept-unsealed"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(&format!("sealed {w1_node} (was unsealed)")), "{}", text(&out));

    // 4. The master with the secret now leads on the sealed store, and
    //    strangers can neither read nor write anything of the cluster.
    let mut m = c.master(&spec);
    let mut w = c.worker("w1", &[spec.addr()], 1, 128, &["--secret-file", &secret]);
    wait_for(BOUND, "the sealed master ALIVE with w1", || {
        alive_with_workers(&state_of(&spec)?, &["w1"])
    });
    wait_for(BOUND, "m1 leads", || alive(&spec));
    // Seal refuses while a master runs.
    let out = seal(&[]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("a master is running"), "{}", text(&out));
    smol::block_on(async {
        let member = connect(&zk_addr, Some(digest_credentials(secret_text.as_bytes()))).await;
        let candidates = member.list_children(&election).await.unwrap();
        assert_eq!(candidates.len(), 1, "{candidates:?}");
        let candidate = format!("{election}/{}", candidates[0]);
        let top = member.list_children(&state).await.unwrap();
        let shard = w1_node.rsplit_once('/').unwrap().0.to_owned();
        assert!(top.contains(&"epoch".to_owned()), "{top:?}");
        assert!(member.list_children(&shard).await.unwrap().contains(&"w-w1".to_owned()));
        let records = [format!("{state}/epoch"), w1_node.clone()];

        let stranger = connect(&zk_addr, None).await;
        let wrong = connect(&zk_addr, Some(digest_credentials(b"some other secret"))).await;
        let no_auth: Result<(), zkc::Error> = Err(zkc::Error::NoAuth);
        for who in [&stranger, &wrong] {
            for path in [&state, &election, &root, &shard] {
                assert_eq!(who.list_children(path).await.map(|_| ()), no_auth, "listing {path}");
            }
            for path in &records {
                assert_eq!(who.get_data(path).await.map(|_| ()), no_auth, "reading {path}");
                assert_eq!(who.set_data(path, b"x", None).await.map(|_| ()), no_auth, "{path}");
                assert_eq!(who.delete(path, None).await, no_auth, "deleting {path}");
            }
            assert_eq!(who.get_data(&candidate).await.map(|_| ()), no_auth, "{candidate}");
            assert_eq!(who.set_data(&candidate, b"x", None).await.map(|_| ()), no_auth);
            assert_eq!(who.delete(&candidate, None).await, no_auth, "deleting {candidate}");
            let open = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
            let ephemeral = zkc::CreateMode::EphemeralSequential.with_acls(zkc::Acls::anyone_all());
            for planted in [format!("{state}/f-evil"), format!("{shard}/f-evil")] {
                assert_eq!(who.create(&planted, b"x", &open).await.map(|_| ()), no_auth);
            }
            let rival = format!("{election}/rival-");
            assert_eq!(who.create(&rival, b"x", &ephemeral).await.map(|_| ()), no_auth);
        }
        for path in [root.clone(), state.clone(), election.clone(), shard.clone(), w1_node.clone()]
        {
            let (acls, _) = member.get_acl(&path).await.unwrap();
            assert_eq!(acls.len(), 1, "{path}: {acls:?}");
            assert_eq!(acls[0].scheme(), "digest", "{path}: {acls:?}");
        }
    });
    w.stop(Duration::from_secs(10));
    m.stop(Duration::from_secs(10));
}
