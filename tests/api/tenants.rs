//! Applying tenant files: create, no-op, update, conflicts.

use balcao::store::TenantStore;
use balcao::tenant::{ApplyOutcome, TenantSpec};
use chrono::Utc;

use crate::contract;

const FILE: &str = r#"
name = "Studio Bela"
slug = "studio-bela"
timezone = "America/Manaus"
staff = ["+5592988887777", "+5592911112222"]

[whatsapp]
phone_number_id = "300300300"
"#;

contract!(applying_the_same_file_twice_changes_nothing, |db| async move {
    let spec = TenantSpec::parse(FILE).unwrap();
    let created = db.store.apply_tenant(&spec, Utc::now()).await.unwrap();
    let ApplyOutcome::Created(id) = created else { panic!("{created:?}") };
    assert_eq!(db.store.apply_tenant(&spec, Utc::now()).await.unwrap(), ApplyOutcome::Unchanged(id));

    let tenant = db.store.tenant_by_phone_number_id("300300300").await.unwrap().unwrap();
    assert_eq!((tenant.id, tenant.name.as_str(), tenant.timezone), (id, "Studio Bela", chrono_tz::America::Manaus));
    assert_eq!(db.store.staff(id).await.unwrap().len(), 2);

    let renamed = TenantSpec::parse(&FILE.replace("Studio Bela", "Studio Bela Vista")).unwrap();
    assert_eq!(db.store.apply_tenant(&renamed, Utc::now()).await.unwrap(), ApplyOutcome::Updated(id));
    let fewer_staff =
        TenantSpec::parse(&FILE.replace("Studio Bela", "Studio Bela Vista").replace(", \"+5592911112222\"", ""))
            .unwrap();
    assert_eq!(db.store.apply_tenant(&fewer_staff, Utc::now()).await.unwrap(), ApplyOutcome::Updated(id));
    let staff: Vec<String> = db.store.staff(id).await.unwrap().iter().map(|p| p.to_string()).collect();
    assert_eq!(staff, ["+5592988887777"]);
    assert_eq!(db.store.apply_tenant(&fewer_staff, Utc::now()).await.unwrap(), ApplyOutcome::Unchanged(id));

    let with_token = TenantSpec::parse(&format!("{FILE}access_token = \"EAAG-x\"\n")).unwrap();
    assert_eq!(db.store.apply_tenant(&with_token, Utc::now()).await.unwrap(), ApplyOutcome::Updated(id));
    assert!(db.store.any_tenant_has_token().await.unwrap());
});

contract!(a_number_belongs_to_one_tenant, |db| async move {
    db.store.apply_tenant(&TenantSpec::parse(FILE).unwrap(), Utc::now()).await.unwrap();
    let thief = TenantSpec::parse(&FILE.replace("studio-bela", "outro")).unwrap();
    let err = db.store.apply_tenant(&thief, Utc::now()).await.unwrap_err();
    assert!(err.to_string().contains("300300300 already belongs to another tenant"), "{err}");
    assert!(db.store.tenant_by_slug("outro").await.unwrap().is_none());
});
