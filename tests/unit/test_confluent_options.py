"""Every option of Confluent's S3 sink is honoured, refused with a reason, or warned of.

The table is :data:`blockgz.sink.jobconfig.settings_names.CONFLUENT_S3_OPTIONS`; these tests walk it
and check the class of each name, then the store-level options blockgz honours: tagging, the MD5
digest, Transfer Acceleration, the proxy and the credential providers (no network: moto and
SeaweedFS are in ``tests/integration/test_s3_options.py``).
"""

from __future__ import annotations

import base64
import hashlib
import logging
from datetime import UTC, datetime, timedelta

import pytest
from botocore.stub import Stubber

from blockgz.blocks.checksum import block_crc32
from blockgz.errors import ConfigError, StoreError
from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.sink.jobconfig.settings_names import (
    CONFLUENT_S3_OPTIONS,
    HONOURED,
    READ,
    REFUSED,
    WARNED,
    check_keys,
    describe_ignored,
)
from blockgz.store.credential_sources import CREDENTIALS_PROVIDERS
from blockgz.store.digest import crc32_header
from blockgz.store.s3 import S3Store, content_md5, offset_tags
from blockgz.store.s3_client import assume_role_credentials, make_client, new_session
from blockgz.store.settings import OPTION_NAMES, S3Settings

#: Options the store layer (S3Settings) honours.
STORE_HONOURED = frozenset(
    {
        "s3.bucket.name",
        "s3.region",
        "store.url",
        "s3.path.style.access.enabled",
        "s3.wan.mode",
        "aws.access.key.id",
        "aws.secret.access.key",
        "s3.credentials.provider.class",
        "s3.credentials.provider.sts.role.arn",
        "s3.credentials.provider.sts.role.session.name",
        "s3.credentials.provider.sts.role.external.id",
        "s3.credentials.provider.sts.region",
        "s3.proxy.url",
        "s3.proxy.user",
        "s3.proxy.password",
        "s3.ssea.name",
        "s3.sse.kms.key.id",
        "s3.sse.customer.key",
        "s3.acl.canned",
        "s3.send.digest",
        "s3.object.tagging",
        "s3.object.tagging.key.value.pairs",
        "s3.object.behavior.on.tagging.error",
        "s3.part.size",
        "s3.part.retries",
        "s3.retry.backoff.ms",
    }
)
ASSUME_ROLE = "io.confluent.connect.s3.auth.AwsAssumeRoleCredentialsProvider"
STS = {
    "s3.credentials.provider.class": ASSUME_ROLE,
    "s3.credentials.provider.sts.role.arn": "arn:aws:iam::123456789012:role/archiver",
    "s3.credentials.provider.sts.role.session.name": "blockgz",
}


def job_options(**extra: str) -> dict[str, str]:
    """A minimal pasted connector config writing to S3."""
    return {
        "name": "s3-sink",
        "connector.class": "io.confluent.connect.s3.S3SinkConnector",
        "topics": "orders",
        "kafka.bootstrap.servers": "127.0.0.1:9092",
        "s3.bucket.name": "archive",
        "format.class": "io.confluent.connect.s3.format.json.JsonFormat",
        "flush.size": "3",
        **extra,
    }


def s3(**extra: str) -> S3Settings:
    return S3Settings.from_options({"s3.bucket.name": "archive", **extra})


# -- the table, walked -----------------------------------------------------------------------
def test_every_confluent_option_is_in_exactly_one_class():
    honoured, refused, warned = set(HONOURED), set(REFUSED), set(WARNED)
    assert not honoured & refused and not honoured & warned and not refused & warned
    assert honoured | refused | warned == set(CONFLUENT_S3_OPTIONS)
    for name in CONFLUENT_S3_OPTIONS:
        assert [name in honoured, name in refused, name in warned].count(True) == 1, name


def test_the_table_lists_what_the_store_honours():
    assert STORE_HONOURED <= HONOURED
    assert set(OPTION_NAMES) >= STORE_HONOURED


@pytest.mark.parametrize("name", sorted(HONOURED))
def test_honoured_options_are_read(name):
    assert name in READ


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_options_fail_at_startup_naming_the_option_and_the_reason(name):
    refusal = REFUSED[name]
    assert refusal.example, name
    with pytest.raises(ConfigError) as raised:
        ExportSettings.from_mapping(job_options(**refusal.example))
    message = str(raised.value)
    assert f"{name}: " in message
    assert refusal.reason in message


@pytest.mark.parametrize(
    "options",
    [
        {"enable.conditional.writes": "false", "rotate.schedule.interval.ms": "600000"},
        {"enable.conditional.writes": "true"},  # Confluent sends it only on schedule
        {"enable.conditional.writes": "true", "rotate.schedule.interval.ms": "-1"},
        {"storage.class": "io.confluent.connect.s3.storage.S3Storage"},
    ],
)
def test_refused_options_pass_with_values_blockgz_follows(options):
    assert not set(check_keys(options)) & set(REFUSED)


def test_warned_options_share_one_warning_line(caplog):
    every = {k: v for refusal in WARNED.values() for k, v in refusal.example.items()}
    with caplog.at_level(logging.WARNING, logger="blockgz.export"):
        ExportSettings.from_mapping(job_options(**every))
    lines = [r.getMessage() for r in caplog.records if "does not read" in r.getMessage()]
    assert len(lines) == 1, lines
    for name in WARNED:
        assert name in lines[0]


@pytest.mark.parametrize("name", sorted(WARNED))
def test_each_warned_option_is_named_with_its_reason(name):
    warned = check_keys(job_options(**WARNED[name].example))
    assert name in warned
    assert f"{name} ({WARNED[name].reason})" in describe_ignored(warned)


def test_warned_options_with_the_value_blockgz_follows_are_quiet():
    quiet = {"enhanced.avro.schema.support": "true", "allow.optional.map.keys": "true"}
    assert check_keys(job_options(**quiet)) == []


def test_s3_settings_with_a_local_target_are_warned_of():
    options = job_options(path="/tmp/archive", **{"s3.part.size": "5242880"})
    del options["s3.bucket.name"]
    assert check_keys(options) == ["s3.part.size"]


def test_typos_and_refusals_are_one_error():
    with pytest.raises(ConfigError, match=r"flush\.szie: .*; storage\.class: "):
        check_keys({"flush.szie": "3", "storage.class": "HdfsStorage"})


# -- store-level refusals ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"s3.wan.mode": "true", "store.url": "http://127.0.0.1:9000"},
            r"s3\.wan\.mode=true cannot be used with store\.url: Transfer Acceleration",
        ),
        (
            {"s3.wan.mode": "true"},
            r"s3\.wan\.mode=true needs s3\.path\.style\.access\.enabled=false",
        ),
        (
            {
                "s3.wan.mode": "true",
                "s3.path.style.access.enabled": "false",
                "s3.bucket.name": "a.b",
            },
            r"s3\.wan\.mode=true cannot be used with bucket 'a\.b'",
        ),
        (
            {"s3.credentials.provider.class": "com.example.MyProvider"},
            r"s3\.credentials\.provider\.class: 'com\.example\.MyProvider' has no boto3 "
            r"equivalent .*allowed: com\.amazonaws\.auth\.DefaultAWSCredentialsProviderChain, ",
        ),
        (
            {"s3.credentials.provider.class": ASSUME_ROLE},
            r"s3\.credentials\.provider\.sts\.role\.arn is required",
        ),
        (
            {**STS, "s3.credentials.provider.sts.role.session.name": ""},
            r"s3\.credentials\.provider\.sts\.role\.session\.name is required",
        ),
        (
            {"s3.credentials.provider.sts.role.arn": "arn:aws:iam::1:role/r"},
            r"s3\.credentials\.provider\.sts\.role\.arn: only used with",
        ),
        ({"s3.proxy.user": "u"}, r"s3\.proxy\.user/s3\.proxy\.password need s3\.proxy\.url"),
        ({"s3.proxy.url": "ftp://proxy"}, r"s3\.proxy\.url: 'ftp://proxy' is not a proxy URL"),
        (
            {"s3.object.tagging.key.value.pairs": "a:b"},
            r"only used with s3\.object\.tagging=true",
        ),
        (
            {"s3.object.tagging": "true", "s3.object.tagging.key.value.pairs": "ab"},
            r"'ab' is not key:value",
        ),
        (
            {"s3.object.tagging": "true", "s3.object.tagging.key.value.pairs": "endOffset:1"},
            r"'endOffset' is one of the offset tags",
        ),
        (
            {
                "s3.object.tagging": "true",
                "s3.object.tagging.key.value.pairs": ",".join(f"k{i}:v" for i in range(8)),
            },
            r"8 tags; S3 allows 10 per object, 3 of them the offset tags, so at most 7",
        ),
        (
            {"s3.object.tagging": "true", "s3.object.tagging.key.value.pairs": "a:b*c"},
            r"S3 tags allow letters",
        ),
        ({"s3.object.behavior.on.tagging.error": "retry"}, r"allowed: ignore, fail"),
        ({"s3.send.digest": "yes"}, r"s3\.send\.digest: 'yes' is not allowed"),
    ],
)
def test_store_options_refuse_what_cannot_work(options, message):
    with pytest.raises(ConfigError, match=message):
        S3Settings.from_options({"s3.bucket.name": "archive", **options})


# -- store-level options honoured ----------------------------------------------------------
def test_tagging_settings():
    settings = s3(
        **{
            "s3.object.tagging": "true",
            "s3.object.tagging.key.value.pairs": "team:data, url:https://x/y",
            "s3.object.behavior.on.tagging.error": "FAIL",
        }
    )
    assert settings.object_tagging
    assert settings.object_tags == (("team", "data"), ("url", "https://x/y"))
    assert settings.on_tagging_error == "fail"
    assert offset_tags(5, 9, 3) == {"startOffset": "5", "endOffset": "9", "recordCount": "3"}


def stubbed(settings: S3Settings) -> tuple[S3Store, Stubber]:
    client = new_session(settings).client("s3", region_name="us-east-1")
    return S3Store(settings, client=client), Stubber(client)


@pytest.fixture
def no_aws(monkeypatch, tmp_path):
    """No credentials or config from the developer's environment."""
    import os

    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return tmp_path


def test_tag_sends_offset_and_extra_tags(no_aws):
    settings = s3(
        **{
            "aws.access.key.id": "a",
            "aws.secret.access.key": "b",
            "s3.object.tagging": "true",
            "s3.object.tagging.key.value.pairs": "team:data",
        }
    )
    store, stub = stubbed(settings)
    tags = [
        {"Key": "team", "Value": "data"},
        {"Key": "startOffset", "Value": "0"},
        {"Key": "endOffset", "Value": "2"},
        {"Key": "recordCount", "Value": "3"},
    ]
    stub.add_response(
        "put_object_tagging",
        {},
        {"Bucket": "archive", "Key": "k", "Tagging": {"TagSet": tags}},
    )
    with stub:
        assert store.tag("k", offset_tags(0, 2, 3)) is True
    stub.assert_no_pending_responses()


@pytest.mark.parametrize("behavior", ["ignore", "fail"])
def test_tagging_errors_are_ignored_or_raised(no_aws, behavior, caplog):
    settings = s3(
        **{
            "aws.access.key.id": "a",
            "aws.secret.access.key": "b",
            "s3.object.tagging": "true",
            "s3.object.behavior.on.tagging.error": behavior,
            "s3.part.retries": "1",
        }
    )
    store, stub = stubbed(settings)
    stub.add_client_error("put_object_tagging", "AccessDenied", http_status_code=403)
    with stub:
        if behavior == "fail":
            with pytest.raises(StoreError, match="PutObjectTagging s3://archive/k"):
                store.tag("k", {"a": "b"})
        else:
            assert store.tag("k", {"a": "b"}) is False
            assert "could not tag s3://archive/k" in caplog.text


def test_content_md5_is_the_base64_of_the_md5():
    assert content_md5(b"abc") == base64.b64encode(hashlib.md5(b"abc").digest()).decode()


@pytest.mark.parametrize("send", [False, True])
def test_send_digest_puts_content_md5_on_put_and_parts(no_aws, send):
    keys = {"aws.access.key.id": "a", "aws.secret.access.key": "b"}
    settings = s3(
        **keys,
        **{
            "s3.send.digest": str(send).lower(),
            "s3.part.size": "5242880",
            "s3.upload.concurrency": "1",  # parts in order, as the stubber expects
        },
    )
    store, stub = stubbed(settings)
    md5 = {"ContentMD5": content_md5(b"small")} if send else {}
    crc = {"ChecksumAlgorithm": "CRC32", "ChecksumCRC32": crc32_header(block_crc32(b"small"))}
    put = {"Bucket": "archive", "Key": "s", "Body": b"small", **md5, **crc}
    stub.add_response("put_object", {}, put)
    part = b"x" * settings.part_size
    whole = {"ChecksumAlgorithm": "CRC32", "ChecksumType": "FULL_OBJECT"}
    stub.add_response(
        "create_multipart_upload", {"UploadId": "u"}, {"Bucket": "archive", "Key": "m", **whole}
    )
    for number, body in ((1, part), (2, b"tail")):
        md5 = {"ContentMD5": content_md5(body)} if send else {}
        md5["ChecksumCRC32"] = crc32_header(block_crc32(body))  # S3's own per-part check
        expected = {"Bucket": "archive", "Key": "m", "UploadId": "u", "PartNumber": number}
        stub.add_response("upload_part", {"ETag": f'"{number}"'}, {**expected, "Body": body, **md5})
    stub.add_response("complete_multipart_upload", {}, None)
    with stub:
        store.put("s", b"small")
        with store.open_upload("m") as upload:
            upload.write(part + b"tail")
    stub.assert_no_pending_responses()
    store.close()


def test_wan_mode_uses_the_accelerate_endpoint(no_aws):
    keys = {"aws.access.key.id": "a", "aws.secret.access.key": "b", "s3.region": "eu-west-1"}
    settings = s3(**keys, **{"s3.wan.mode": "true", "s3.path.style.access.enabled": "false"})
    client = make_client(settings)
    assert client.meta.config.s3["use_accelerate_endpoint"] is True
    url = client.generate_presigned_url("get_object", Params={"Bucket": "archive", "Key": "k"})
    assert url.startswith("https://archive.s3-accelerate.amazonaws.com/k")


def test_proxy_settings_reach_the_client(no_aws):
    settings = s3(
        **{
            "s3.proxy.url": "proxy.corp:3128",
            "s3.proxy.user": "svc",
            "s3.proxy.password": "p@ss:word",
        }
    )
    assert settings.proxy_url == "http://svc:p%40ss%3Aword@proxy.corp:3128"
    assert "p@ss" not in repr(settings)
    proxies = make_client(settings).meta.config.proxies
    assert proxies == {"http": settings.proxy_url, "https": settings.proxy_url}


# -- credentials -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("cls", "kind"),
    [
        ("com.amazonaws.auth.DefaultAWSCredentialsProviderChain", "default"),
        ("software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider", "default"),
        ("com.amazonaws.auth.profile.ProfileCredentialsProvider", "profile"),
        ("software.amazon.awssdk.auth.credentials.ProfileCredentialsProvider", "profile"),
        ("com.amazonaws.auth.EnvironmentVariableCredentialsProvider", "env"),
        ("com.amazonaws.auth.WebIdentityTokenCredentialsProvider", "web-identity"),
        (
            "software.amazon.awssdk.auth.credentials.WebIdentityTokenFileCredentialsProvider",
            "web-identity",
        ),
        ("com.amazonaws.auth.InstanceProfileCredentialsProvider", "instance"),
        ("software.amazon.awssdk.auth.credentials.ContainerCredentialsProvider", "container"),
        (ASSUME_ROLE, "assume-role"),
    ],
)
def test_provider_classes_map_to_boto3_sources(cls, kind):
    extra = STS if kind == "assume-role" else {}
    settings = s3(**{**extra, "s3.credentials.provider.class": cls})
    assert settings.credentials_provider == kind
    assert CREDENTIALS_PROVIDERS[cls] == kind


def test_default_chain_reads_the_environment(no_aws, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "from-env")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    creds = new_session(s3()).get_credentials()
    assert (creds.access_key, creds.method) == ("from-env", "env")


def test_profile_provider_reads_the_profile_not_the_environment(no_aws, monkeypatch):
    (no_aws / "credentials").write_text(
        "[default]\naws_access_key_id = dflt\naws_secret_access_key = s\n"
        "[ops]\naws_access_key_id = from-ops\naws_secret_access_key = s\n"
    )
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "from-env")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    profile = "com.amazonaws.auth.profile.ProfileCredentialsProvider"
    settings = s3(**{"s3.credentials.provider.class": profile})
    assert new_session(settings).get_credentials().access_key == "dflt"
    monkeypatch.setenv("AWS_PROFILE", "ops")
    assert new_session(settings).get_credentials().access_key == "from-ops"
    with_option = s3(**{"s3.credentials.provider.class": profile, "aws.profile": "default"})
    assert new_session(with_option).get_credentials().access_key == "dflt"


def test_single_source_providers_use_that_source_only(no_aws, monkeypatch):
    (no_aws / "credentials").write_text(
        "[default]\naws_access_key_id = dflt\naws_secret_access_key = s\n"
    )
    env = "com.amazonaws.auth.EnvironmentVariableCredentialsProvider"
    assert new_session(s3(**{"s3.credentials.provider.class": env})).get_credentials() is None
    token = no_aws / "token"
    token.write_text("jwt")
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token))
    monkeypatch.setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/irsa")
    web = "com.amazonaws.auth.WebIdentityTokenCredentialsProvider"
    creds = new_session(s3(**{"s3.credentials.provider.class": web})).get_credentials()
    assert creds.method == "assume-role-with-web-identity"


def test_static_keys_win_over_a_provider_as_in_confluent(no_aws):
    web = "com.amazonaws.auth.WebIdentityTokenCredentialsProvider"
    settings = s3(
        **{
            "s3.credentials.provider.class": web,
            "aws.access.key.id": "static",
            "aws.secret.access.key": "s",
        }
    )
    assert new_session(settings).get_credentials().access_key == "static"


def test_assume_role_calls_sts_with_role_session_and_external_id(no_aws):
    settings = s3(
        **STS,
        **{
            "aws.access.key.id": "base",
            "aws.secret.access.key": "s",
            "s3.credentials.provider.sts.role.external.id": "ext-42",
            "s3.credentials.provider.sts.region": "eu-central-1",
        },
    )
    calls = []

    class FakeSts:
        def assume_role(self, **kwargs):
            calls.append(kwargs)
            expires = datetime.now(UTC) + timedelta(hours=1)
            return {
                "Credentials": {
                    "AccessKeyId": "ASIATEMP",
                    "SecretAccessKey": "t",
                    "SessionToken": "tok",
                    "Expiration": expires,
                },
                "AssumedRoleUser": {"Arn": "arn:aws:sts::123456789012:assumed-role/a/b"},
            }

    class Base:
        def get_credentials(self):
            return new_session(
                s3(**{"aws.access.key.id": "base", "aws.secret.access.key": "s"})
            ).get_credentials()

        def client(self, service, **kwargs):
            assert service == "sts"
            assert kwargs["region_name"] == "eu-central-1"
            assert kwargs["aws_access_key_id"] == "base"
            return FakeSts()

    creds = assume_role_credentials(settings, Base())
    assert calls == []  # deferred: STS is called on first use
    frozen = creds.get_frozen_credentials()
    assert (frozen.access_key, frozen.token) == ("ASIATEMP", "tok")
    assert calls == [
        {
            "RoleArn": "arn:aws:iam::123456789012:role/archiver",
            "RoleSessionName": "blockgz",
            "ExternalId": "ext-42",
        }
    ]
    assert creds.method == "assume-role"


@pytest.mark.parametrize("url", ["file:///tmp/archive", "s3://bucket", "ftp://host"])
def test_a_store_url_that_is_not_http_is_one_line_naming_it(url):
    with pytest.raises(ConfigError, match=r"store\.url=.*http:// or https://"):
        S3Settings.from_options({"s3.bucket.name": "b", "store.url": url})


def test_a_bare_host_store_url_becomes_https():
    settings = S3Settings.from_options({"s3.bucket.name": "b", "store.url": "minio.local:9000"})
    assert settings.endpoint_url == "https://minio.local:9000"
