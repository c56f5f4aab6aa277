//! `regent tenant set` and `regent tenant list` (docs/tenants.md,
//! docs/design.md#issue-44): a tenant's guarantee, limit and weight, and
//! what each tenant holds.

use crate::args::{Common, TenantCommand};
use crate::common::{masters_of, net_config, patience};
use regent_core::protocol::tenants::{describe_memory, Dims, Held, Tenant, TenantView};
use std::process::ExitCode;

/// Runs `regent tenant set|list`.
pub async fn run(common: &Common, command: TenantCommand) -> Result<ExitCode, String> {
    match command {
        TenantCommand::Set { masters, connect_timeout, guarantee, limit, weight, name } => {
            let tenant = Tenant {
                name,
                guarantee: Dims::parse(&guarantee).map_err(|e| format!("--guarantee: {e}"))?,
                limit: Dims::parse(&limit).map_err(|e| format!("--limit: {e}"))?,
                weight,
            };
            tenant.check().map_err(|e| e.to_string())?;
            let shown = describe(&tenant);
            regent_smol::client::set_tenant_with(
                &masters_of(common, &masters).await?,
                net_config(common)?,
                tenant,
                patience(connect_timeout),
            )
            .await
            .map_err(|e| e.to_string())?;
            println!("tenant set: {shown}");
            Ok(ExitCode::SUCCESS)
        }
        TenantCommand::List { masters, connect_timeout, json } => {
            let tenants = regent_smol::client::tenants_with(
                &masters_of(common, &masters).await?,
                net_config(common)?,
                patience(connect_timeout),
            )
            .await
            .map_err(|e| e.to_string())?;
            if json {
                let text = serde_json::to_string_pretty(&tenants).map_err(|e| e.to_string())?;
                println!("{text}");
            } else {
                print!("{}", table(&tenants));
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `team-a weight 3 guarantee cores=16 limit cores=64`.
fn describe(t: &Tenant) -> String {
    format!(
        "{} weight {} guarantee {} limit {}",
        t.name,
        t.weight,
        t.guarantee.describe(),
        t.limit.describe()
    )
}

/// What a tenant holds, as `cores=8,memory=4G,gpu=1`.
fn held(h: &Held) -> String {
    let mut parts =
        vec![format!("cores={}", h.cores), format!("memory={}", describe_memory(h.memory_mb))];
    parts.extend(h.resources.iter().map(|(n, v)| format!("{n}={v}")));
    parts.join(",")
}

/// The tenants as `regent tenant list` prints them: one line each.
fn table(tenants: &[TenantView]) -> String {
    let mut out = format!(
        "{:<20} {:>6} {:>7} {:>10}  {:<28} {:<28} {}\n",
        "TENANT", "WEIGHT", "SHARE", "FRAMEWORKS", "USE", "GUARANTEE", "LIMIT"
    );
    for v in tenants {
        let name =
            if v.set { v.tenant.name.clone() } else { format!("{} (implicit)", v.tenant.name) };
        out.push_str(&format!(
            "{:<20} {:>6} {:>6.1}% {:>10}  {:<28} {:<28} {}\n",
            name,
            v.tenant.weight,
            f64::from(v.dominant_share_ppm) / 10_000.0,
            v.frameworks,
            held(&v.held),
            v.tenant.guarantee.describe(),
            v.tenant.limit.describe(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_shows_use_guarantee_limit_weight_and_share() {
        let view = TenantView {
            tenant: Tenant {
                name: "team-a".into(),
                guarantee: Dims::parse("cores=16").unwrap(),
                limit: Dims::parse("cores=64,memory=256G").unwrap(),
                weight: 3,
            },
            set: true,
            held: Held { cores: 8, memory_mb: 4096, resources: vec![("gpu".into(), 1)] },
            dominant_share_ppm: 250_000,
            frameworks: 2,
        };
        let text = table(&[view]);
        let line = text.lines().nth(1).unwrap();
        for part in [
            "team-a",
            " 3 ",
            "25.0%",
            " 2 ",
            "cores=8,memory=4G,gpu=1",
            "cores=16",
            "cores=64,memory=256G",
        ] {
            assert!(line.contains(part), "{part:?} in {line:?}");
        }
    }
}
