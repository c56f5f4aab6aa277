//! `regent store check|dump|seal`: a filesystem store's directory, or a
//! ZooKeeper cluster's records.

use crate::args::{Common, SealArgs, StoreCommand};
use crate::common::{read_secret, read_secrets};
use std::process::ExitCode;

pub async fn store_command(common: &Common, command: StoreCommand) -> Result<ExitCode, String> {
    let (args, dump) = match command {
        StoreCommand::Check(args) => (args, false),
        StoreCommand::Dump(args) => (args, true),
        StoreCommand::Seal(_) => unreachable!("run by seal_command"),
    };
    let Some(dir) = args.dir else {
        return zk_store_command(common, &args.zk, &args.zk_root, dump).await;
    };
    if !dir.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    // No previous secrets here: a check only reads, and re-sealing is a
    // write (`regent store seal`).
    let secret = common.secret_file.as_deref().map(read_secret).transpose()?;
    let sealing = regent_std::store::master_sealing(secret.as_ref(), &[])?;
    match regent_std::store::FsStore::open_with(&dir, "regent store", sealing) {
        Ok((_store, loaded)) => {
            for w in &loaded.warnings {
                println!("warning: {w}");
            }
            if dump {
                for r in &loaded.records {
                    println!("{}: {r:?}", r.key());
                }
            }
            println!("{}: {} records, all intact", dir.display(), loaded.records.len());
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("regent: store {}: {e}", dir.display());
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `regent store check|dump --zk`: reads and verifies a ZooKeeper store.
pub async fn zk_store_command(
    common: &Common,
    hosts: &[String],
    root: &str,
    dump: bool,
) -> Result<ExitCode, String> {
    let secret = common.secret_file.as_deref().map(read_secret).transpose()?;
    let sealing = regent_std::store::master_sealing(secret.as_ref(), &[])?;
    let mut zk = regent_smol::zk::ZkConfig::new(hosts.join(","));
    if let Some(secret) = &secret {
        zk = zk.with_secret(secret.expose().to_vec());
    }
    match regent_smol::zk::seal::check_zookeeper(&zk, root, &sealing).await {
        Ok(report) => {
            if dump {
                for r in &report.records {
                    println!("{}: {r:?}", r.key());
                }
            }
            if report.flat > 0 {
                println!(
                    "note: {} record node(s) in the flat layout of an earlier version: the next \
                     leader moves them into their shards",
                    report.flat
                );
            }
            println!(
                "{root}: {} records in {} shards, all intact",
                report.records.len(),
                report.shards
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("regent: store {root}: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `regent store seal`: see [`StoreCommand::Seal`].
pub async fn seal_command(common: &Common, a: SealArgs) -> Result<ExitCode, String> {
    use regent_core::store::seal::Seal;
    let secret = common
        .secret_file
        .as_deref()
        .map(read_secret)
        .transpose()?
        .ok_or("regent store seal needs the cluster secret (--secret-file F) to seal with")?;
    let previous = read_secrets(&a.previous_secret_files)?;
    let mut sealing = regent_std::store::master_sealing(Some(&secret), &previous)?;
    if a.accept_unsealed {
        sealing = sealing.accepting_unsealed();
    }
    let key = sealing.current_key_id().map(|k| k.to_string()).unwrap_or_default();
    let how = |seal: &Seal| match seal {
        Seal::Unsealed => "unsealed".to_owned(),
        Seal::Sealed(k) => format!("sealed under previous key {k}"),
    };
    if let Some(dir) = a.store.dir {
        if !dir.is_dir() {
            return Err(format!("{} is not a directory", dir.display()));
        }
        // The directory lock keeps a running master out (and this out of a
        // running master's store).
        let (_store, loaded) =
            regent_std::store::FsStore::open_with(&dir, "regent store seal", sealing)
                .map_err(|e| format!("store {}: {e}", dir.display()))?;
        for (k, seal) in &loaded.resealed {
            println!("sealed {k} (was {})", how(seal));
        }
        println!(
            "{}: {} records, {} re-sealed, all sealed under key {key}",
            dir.display(),
            loaded.records.len(),
            loaded.resealed.len()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let hosts = a.store.zk.join(",");
    let mut zk = regent_smol::zk::ZkConfig::new(hosts).with_secret(secret.expose().to_vec());
    for p in &previous {
        zk = zk.with_previous_secret(p.expose().to_vec());
    }
    let report = regent_smol::zk::seal::seal_zookeeper(&zk, &a.store.zk_root, &sealing).await?;
    for (path, seal) in &report.resealed {
        println!("sealed {path} (was {})", how(seal));
    }
    println!(
        "{}: {} records, {} re-sealed, all sealed under key {key}; {} nodes readable and \
         writable by the current secret only",
        a.store.zk_root,
        report.records,
        report.resealed.len(),
        report.acls_set.len()
    );
    Ok(ExitCode::SUCCESS)
}
