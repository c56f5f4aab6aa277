//! Tenants over `/v1/` (docs/tenants.md, docs/api.md): `GET /v1/tenants`
//! lists every tenant with what it holds, `PUT /v1/tenants/{name}` creates
//! or replaces one (answered once durable). Dimensions are written as the
//! CLI writes them: `cores=16,memory=64G,gpu=2`.

use super::errors::{ApiError, ErrorBody, Unavailable};
use super::jobs::{answer, read_json};
use super::{body, command, request_id, unexpected};
use crate::http::Response;
use regent_core::protocol::tenants::{Dims, Tenant, TenantView};
use regent_core::protocol::Message;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// The body of `PUT /v1/tenants/{name}`.
#[derive(Clone, Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantBody {
    /// What it is guaranteed, `cores=16,memory=64G,gpu=2` (default: none).
    #[serde(default)]
    pub guarantee: Option<String>,
    /// The most its live executors may hold (default: no limit); a slot
    /// that would pass it waits.
    #[serde(default)]
    pub limit: Option<String>,
    /// Its weight in weighted fair sharing, 1 to 1000 (default 1).
    #[serde(default)]
    pub weight: Option<u32>,
}

/// One tenant as `/v1/tenants` shows it.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct TenantJson {
    /// Its name.
    pub name: String,
    /// Whether an operator set it (`false`: the implicit `default`, or a
    /// tenant only frameworks name).
    pub set: bool,
    /// Its weight.
    pub weight: u32,
    /// Its guarantee, `cores=16,memory=64G` (`none`: none).
    pub guarantee: String,
    /// Its limit (`none`: none).
    pub limit: String,
    /// What its live executors hold: `cores`, `memory_mb` and named
    /// resources by name.
    #[serde(rename = "use")]
    pub held: BTreeMap<String, u64>,
    /// Its dominant share (0 to 1) before its weight.
    pub dominant_share: f64,
    /// How many frameworks it has.
    pub frameworks: u32,
}

/// The answer to `GET /v1/tenants`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct TenantList {
    /// The leader's epoch.
    pub epoch: u64,
    /// Every tenant, by name.
    pub tenants: Vec<TenantJson>,
}

/// The answer to `PUT /v1/tenants/{name}`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct TenantSet {
    /// The tenant.
    pub name: String,
    /// Always `true`: its record is durable.
    pub set: bool,
    /// The leader's epoch.
    pub epoch: u64,
}

fn json(v: TenantView) -> TenantJson {
    let mut held = BTreeMap::from([
        ("cores".to_string(), v.held.cores),
        ("memory_mb".to_string(), v.held.memory_mb),
    ]);
    held.extend(v.held.resources);
    TenantJson {
        name: v.tenant.name,
        set: v.set,
        weight: v.tenant.weight,
        guarantee: v.tenant.guarantee.describe(),
        limit: v.tenant.limit.describe(),
        held,
        dominant_share: f64::from(v.dominant_share_ppm) / 1e6,
        frameworks: v.frameworks,
    }
}

/// `GET /v1/tenants`: `{"epoch", "tenants": [...]}`, the tenants the
/// request's token may read.
#[utoipa::path(get, path = "/v1/tenants", tag = "operator",
    responses(
        (status = 200, description = "Every tenant, with what it holds.", body = TenantList),
        (status = 503, description = "Not the leader, or no answer in time.", body = Unavailable),
    ))]
pub fn list(queries: &super::Asker<'_>) -> Result<Response, ApiError> {
    match command(queries, Message::TenantsRequest { request: request_id() })? {
        Message::TenantsReply { epoch, tenants, .. } => {
            // What the request's token may read (docs/security.md).
            let principal = queries.access.principal();
            let tenants = regent_core::visibility::tenants_visible_to(&principal, tenants);
            let tenants = tenants.into_iter().map(json).collect();
            Ok(answer(200, &TenantList { epoch: epoch.0, tenants }))
        }
        other => Err(unexpected(other, "tenants")),
    }
}

/// `PUT /v1/tenants/{name}`: `{"name", "set", "epoch"}` once durable.
#[utoipa::path(put, path = "/v1/tenants/{name}", tag = "operator",
    params(("name" = String, Path, description = "The tenant.")),
    request_body(content = TenantBody, description = "Its guarantee, limit and weight."),
    responses(
        (status = 200, description = "Set, durable.", body = TenantSet),
        (status = 400, description = "A bad name, dimension or weight.", body = ErrorBody),
        (status = 503, description = "Not the leader, or no answer in time.", body = Unavailable),
    ))]
pub fn set(
    request: &mut tiny_http::Request,
    name: &str,
    queries: &super::Asker<'_>,
) -> Result<Response, ApiError> {
    let bytes = body(request)?;
    let b: TenantBody = if bytes.iter().all(u8::is_ascii_whitespace) {
        TenantBody::default()
    } else {
        read_json(&bytes)?
    };
    let dims = |field: &str, text: &Option<String>| {
        Dims::parse(text.as_deref().unwrap_or("none"))
            .map_err(|e| ApiError::field(Some(field.into()), e.0))
    };
    let tenant = Tenant {
        name: name.to_string(),
        guarantee: dims("guarantee", &b.guarantee)?,
        limit: dims("limit", &b.limit)?,
        weight: b.weight.unwrap_or(1),
    };
    tenant.check().map_err(|e| ApiError::field(None, e.0))?;
    match command(queries, Message::SetTenant { request: request_id(), tenant })? {
        Message::RequestAccepted { epoch, .. } => {
            Ok(answer(200, &TenantSet { name: name.to_string(), set: true, epoch: epoch.0 }))
        }
        other => Err(unexpected(other, name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regent_core::protocol::tenants::Held;

    #[test]
    fn a_tenant_shows_its_use_by_dimension_and_its_share() {
        let v = TenantView {
            tenant: Tenant { weight: 3, ..Tenant::new("team-a") },
            set: true,
            held: Held { cores: 8, memory_mb: 4096, resources: vec![("gpu".into(), 1)] },
            dominant_share_ppm: 250_000,
            frameworks: 2,
        };
        let j = serde_json::to_value(json(v)).unwrap();
        assert_eq!(j["use"]["cores"], 8);
        assert_eq!(j["use"]["memory_mb"], 4096);
        assert_eq!(j["use"]["gpu"], 1);
        assert_eq!(j["dominant_share"], 0.25);
        assert_eq!(j["limit"], "none");
        assert_eq!(j["weight"], 3);
    }
}
