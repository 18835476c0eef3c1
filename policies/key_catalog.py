"""The catalog of BookKeeper and Pulsar configuration keys the engine does not read, as each project
spells them: data for the configuration lint (`policies.conf_lint`), which must tell a key it knows
but ignores from a misspelling.

Sources: BookKeeper's `ClientConfiguration`, `AbstractConfiguration` and `ServerConfiguration` key
constants and the placement policies' own (`reppDnsResolverClass`, `networkTopologyScriptFileName`);
the BookKeeper Client and Managed Ledger sections of Pulsar's `broker.conf` and what its
`BookKeeperClientFactoryImpl` translates. The keys the engine reads are `policies.settings.KNOWN_KEYS`
and the engine's own settings modules; none of them is repeated here.
"""

from __future__ import annotations

from collections.abc import Mapping

LOCATION_SOURCE_KEYS: frozenset[str] = frozenset({
    "reppDnsResolverClass", "networkTopologyScriptFileName", "networkTopologyScriptNumberArgs",
    "useHostnameResolveLocalNodePlacementPolicy",
})
"""BookKeeper keys that choose where bookie locations come from; the engine takes them from the events."""

BOOKKEEPER_CLIENT_KEYS: frozenset[str] = LOCATION_SOURCE_KEYS | frozenset({
    "throttle", "digestType", "enableDigestTypeAutodetection", "passwd", "clientKeyStoreType", "clientKeyStore",
    "clientKeyStorePasswordPath", "clientTrustStoreType", "clientTrustStore", "clientTrustStorePasswordPath",
    "clientTcpNoDelay", "clientSockKeepalive", "clientSendBufferSize", "clientReceiveBufferSize",
    "clientWriteBufferLowWaterMark", "clientWriteBufferHighWaterMark", "clientConnectTimeoutMillis",
    "clientTcpUserTimeoutMillis", "numChannelsPerBookie", "useV2WireProtocol", "nettyUsePooledBuffers",
    "readTimeout", "speculativeReadTimeout", "firstSpeculativeReadTimeout", "maxSpeculativeReadTimeout",
    "speculativeReadTimeoutBackoffMultiplier", "firstSpeculativeReadLACTimeout", "maxSpeculativeReadLACTimeout",
    "speculativeReadLACTimeoutBackoffMultiplier", "enableParallelRecoveryRead", "recoveryReadBatchSize",
    "stickyReadSEnabled", "recoveryBatchReadEnabled", "opportunisticStriping", "delayEnsembleChange",
    "maxNumEnsembleChanges", "addEntryTimeoutSec", "addEntryQuorumTimeoutSec", "readEntryTimeoutSec",
    "timeoutMonitorIntervalSec", "timeoutTaskIntervalMillis", "explicitLacInterval",
    "pcbcTimeoutTimerTickDurationMs", "pcbcTimeoutTimerNumTicks", "timeoutTimerTickDurationMs",
    "timeoutTimerNumTicks", "waitTimeoutOnBackpressureMs", "bookieHealthCheckEnabled",
    "bookieHealthCheckIntervalSeconds", "bookieErrorThresholdPerInterval", "bookieQuarantineTimeSeconds",
    "bookieQuarantineRatio", "bookieConnectionErrorQuarantineEnabled", "getBookieInfoIntervalSeconds",
    "getBookieInfoRetryIntervalSeconds", "getBookieInfoTimeoutSecs", "startTLSTimeoutSecs",
    "tlsHostnameVerificationEnabled", "numWorkerThreads", "numIOThreads", "bookieAddressResolverEnabled",
    "useHostnameResolveLocalNodePlacementPolicy", "enableTaskExecutionStats", "taskExecutionWarnTimeMicros",
    "enableBookieFailureTracking", "enableBookieAddressTracking", "disableEnsembleChangeFeatureName", "clientRole",
    "clientAuthProviderFactoryClass", "registrationClientClass", "clientConnectBookieUnavailableLogThrottling",
    "batchReadEnabled", "tcpKeepIdle", "tcpKeepIntvl", "tcpKeepCnt", "zkTimeout", "zkServers",
    "zkRetryBackoffMaxRetries", "ledgerManagerType", "ledgerManagerFactoryClass", "ledgerMetadataVersion",
    "allowShadedLedgerManagerFactoryClass", "shadedLedgerManagerFactoryClassPrefix", "metadataServiceUri",
    "zkLedgersRootPath", "zkRequestRateLimit", "zkReplicationTaskRateLimit", "rereplicationEntryBatchSize",
    "storeSystemTimeAsLedgerUnderreplicatedMarkTime", "storeSystemTimeAsLedgerCreationTime", "enableBusyWait",
    "enableHealthCheck", "metastoreImplClass", "metastoreMaxEntriesPerScan", "tlsProvider",
    "tlsProviderFactoryClass", "ledgerIdFormatterClass", "entryFormatterClass", "tlsClientAuthentication",
    "preserveMdcForTaskExecution", "tlsCertFilesRefreshDurationSeconds", "tlsEnabledCipherSuites",
    "tlsEnabledProtocols", "tlsKeyStoreType", "tlsKeyStore", "tlsKeyStorePasswordPath", "tlsTrustStoreType",
    "tlsTrustStore", "tlsTrustStorePasswordPath", "tlsCertificatePath", "nettyMaxFrameSizeBytes",
    "zkEnableSecurity", "ledgerManagerFactoryDisableClassCheck", "permittedStartupUsers", "allocatorPoolingPolicy",
    "allocatorPoolingConcurrency", "allocatorOutOfMemoryPolicy", "allocatorLeakDetectionPolicy",
    "allocatorExitOnOutOfMemory", "limitStatsLogging", "replicationRateByBytes",
    "ensemblePlacementPolicyOrderSlowBookies", "reppDisableDurabilityEnforcementFeature",
})
"""BookKeeper client keys (`ClientConfiguration`, `AbstractConfiguration`, the placement policies' own
constants) the engine does not read. `stickyReadSEnabled` is BookKeeper's own spelling;
`reppDisableDurabilityEnforcementFeature` is a Feature object BookKeeper takes from code."""

BOOKKEEPER_SERVER_KEYS: frozenset[str] = frozenset({
    "ledgerStorageClass", "logSizeLimit", "entryLogFilePreallocationEnabled", "forceAllowCompaction",
    "minorCompactionInterval", "minorCompactionThreshold", "minorCompactionMaxTimeMillis",
    "majorCompactionInterval", "majorCompactionThreshold", "majorCompactionMaxTimeMillis", "isThrottleByBytes",
    "compactionMaxOutstandingRequests", "compactionRate", "compactionRateByEntries", "compactionRateByBytes",
    "entryLocationCompactionInterval", "gcWaitTime", "isForceGCAllowWhenNoSpace", "gcOverreplicatedLedgerWaitTime",
    "gcOverreplicatedLedgerMaxConcurrentRequests", "gcMetadataOpRateLimit", "useTransactionalCompaction",
    "verifyMetadataOnGC", "gcEntryLogMetadataCacheEnabled", "gcEntryLogMetadataCachePath",
    "useTargetEntryLogSizeForGc", "localScrubInterval", "localScrubRateLimit", "flushInterval",
    "flushEntrylogBytes", "bookieDeathWatchInterval", "openFileLimit", "pageLimit", "pageSize",
    "fileInfoCacheInitialCapacity", "fileInfoMaxIdleTime", "fileInfoFormatVersionToWrite", "journalMaxSizeMB",
    "journalMaxBackups", "journalSyncData", "journalWriteData", "journalAdaptiveGroupWrites",
    "journalMaxGroupWaitMSec", "journalBufferedWritesThreshold", "journalBufferedEntriesThreshold",
    "journalFlushWhenQueueEmpty", "journalRemoveFromPageCache", "journalPreAllocSizeMB",
    "journalWriteBufferSizeKB", "journalAlignmentSize", "numJournalCallbackThreads", "journalFormatVersionToWrite",
    "journalQueueSize", "journalMaxMemorySizeMb", "journalPageCacheFlushIntervalMSec", "journalChannelProvider",
    "journalReuseFiles", "maxAddsInProgressLimit", "maxReadsInProgressLimit", "closeChannelOnResponseTimeout",
    "waitTimeoutOnResponseBackpressureMs", "bookiePort", "listeningInterface", "allowLoopback",
    "advertisedAddress", "bookieId", "allowEphemeralPorts", "journalDirectory", "journalDirectories",
    "ledgerDirectories", "indexDirectories", "allowStorageExpansion", "serverTcpNoDelay", "serverSockKeepalive",
    "serverTcpKeepIdle", "serverTcpKeepIntvl", "serverTcpKeepCnt", "serverTcpLinger",
    "serverWriteBufferLowWaterMark", "serverWriteBufferHighWaterMark", "serverNumAcceptorThreads",
    "serverNumIOThreads", "zkRetryBackoffStartMs", "zkRetryBackoffMaxMs", "openLedgerRereplicationGracePeriod",
    "lockReleaseOfFailedLedgerGracePeriod", "readOnlyModeEnabled", "readOnlyModeOnAnyDiskFullEnabled",
    "forceReadOnlyBookie", "persistBookieStatusEnabled", "diskUsageThreshold", "diskUsageWarnThreshold",
    "diskUsageLwmThreshold", "diskCheckInterval", "auditorPeriodicCheckInterval",
    "auditorPeriodicBookieCheckInterval", "auditorPeriodicPlacementPolicyCheckInterval",
    "repairedPlacementPolicyNotAdheringBookieEnabled", "auditorLedgerVerificationPercentage",
    "autoRecoveryDaemonEnabled", "lostBookieRecoveryDelay", "rwRereplicateBackoffMs",
    "underreplicatedLedgerRecoveryGracePeriod", "auditorReplicasCheckInterval",
    "auditorMaxNumberOfConcurrentOpenLedgerOperations", "auditorAcquireConcurrentOpenLedgerOperationsTimeOutMSec",
    "inFlightReadEntryNumInLedgerChecker", "numAddWorkerThreads", "numReadWorkerThreads",
    "maxPendingReadRequestsPerThread", "maxPendingAddRequestsPerThread", "numLongPollWorkerThreads",
    "numHighPriorityWorkerThreads", "readWorkerThreadsThrottlingEnabled", "requestTimerTickDurationMs",
    "requestTimerNumTicks", "readBufferSizeBytes", "writeBufferSizeBytes", "useHostNameAsBookieID",
    "useShortHostName", "enableLocalTransport", "disableServerSocketBind", "sortedLedgerStorageEnabled",
    "skipListSizeLimit", "skipListArenaChunkSize", "skipListArenaMaxAllocSize", "enableStatistics",
    "statsProviderClass", "sanityCheckMetricsEnabled", "byteBufAllocatorSizeInitial", "byteBufAllocatorSizeMin",
    "byteBufAllocatorSizeMax", "bookieAuthProviderFactoryClass", "minUsableSizeForIndexFileCreation",
    "minUsableSizeForEntryLogCreation", "minUsableSizeForHighPriorityWrites",
    "allowMultipleDirsUnderSameDiskPartition", "httpServerEnabled", "httpServerPort", "httpServerHost",
    "httpServerTlsEnable", "httpServerKeyStorePath", "httpServerKeyStorePassword", "httpServerTrustStorePath",
    "httpServerTrustStorePassword", "extraServerComponents", "ignoreExtraServerComponentsStartupFailures",
    "registrationManagerClass", "entryLogPerLedgerEnabled", "numOfMemtableFlushThreads",
    "entrylogMapAccessExpiryTimeInSeconds", "maximumNumberOfActiveEntryLogs",
    "entryLogPerLedgerCounterLimitsMultFactor", "localConsistencyCheckOnStartup", "authorizedRoles",
    "dataIntegrityChecking", "dataIntegrityStampMissingCookies", "defaultRocksdbConf", "entryLocationRocksdbConf",
    "ledgerMetadataRocksdbConf", "maxOperationNumbersInSingleRocksdbWriteBatch", "skipReplayJournalInvalidRecord",
    "maxBatchReadSize",
})
"""Bookie keys (`ServerConfiguration`): a `bookkeeper.conf` carries them beside the client keys."""

PULSAR_TRANSLATED: Mapping[str, str] = {
    "bookkeeperClientMinNumRacksPerWriteQuorum": "minNumRacksPerWriteQuorum",
    "bookkeeperClientEnforceMinNumRacksPerWriteQuorum": "enforceMinNumRacksPerWriteQuorum",
    "bookkeeperClientReorderReadSequenceEnabled": "reorderReadSequenceEnabled",
    "bookkeeperDiskWeightBasedPlacementEnabled": "diskWeightBasedPlacementEnabled",
    "bookkeeperClientRackawarePolicyEnabled": "ensemblePlacementPolicy",
    "bookkeeperClientRegionawarePolicyEnabled": "ensemblePlacementPolicy",
}
"""Pulsar broker keys the broker translates into a BookKeeper placement key (`BookKeeperClientFactoryImpl`);
the engine reads the BookKeeper key only."""

PULSAR_REGIONAWARE_SWITCH = "bookkeeperClientRegionawarePolicyEnabled"
PULSAR_MIN_AVAILABLE_IN_GROUPS = "bookkeeperClientMinAvailableBookiesInIsolationGroups"

PULSAR_SHAPE_KEYS: tuple[str, str, str] = ("managedLedgerDefaultEnsembleSize", "managedLedgerDefaultWriteQuorum",
                                           "managedLedgerDefaultAckQuorum")
"""Pulsar's default ledger shape (E, W, A)."""
PULSAR_DEFAULT_SHAPE: tuple[int, int, int] = (2, 2, 2)
"""Pulsar's defaults for `PULSAR_SHAPE_KEYS`."""

PULSAR_BROKER_KEYS: frozenset[str] = frozenset(PULSAR_TRANSLATED) | frozenset(PULSAR_SHAPE_KEYS) | frozenset({
    "bookkeeperMetadataServiceUri", "bookkeeperClientAuthenticationPlugin",
    "bookkeeperClientAuthenticationParametersName", "bookkeeperClientAuthenticationParameters",
    "bookkeeperClientTimeoutInSeconds", "bookkeeperClientNumWorkerThreads", "bookkeeperClientNumIoThreads",
    "bookkeeperClientSeparatedIoThreadsEnabled", "bookkeeperClientSpeculativeReadTimeoutInMillis",
    "bookkeeperNumberOfChannelsPerBookie", "bookkeeperUseV2WireProtocol", "bookkeeperClientHealthCheckEnabled",
    "bookkeeperClientHealthCheckIntervalSeconds", "bookkeeperClientHealthCheckErrorThresholdPerInterval",
    "bookkeeperClientHealthCheckQuarantineTimeInSeconds", "bookkeeperClientQuarantineRatio",
    "bookkeeperClientGetBookieInfoIntervalSeconds", "bookkeeperClientGetBookieInfoRetryIntervalSeconds",
    "bookkeeperGetBookieInfoIntervalSeconds", "bookkeeperGetBookieInfoRetryIntervalSeconds",
    PULSAR_MIN_AVAILABLE_IN_GROUPS, "bookkeeperEnableStickyReads",
    "bookkeeperTLSProviderFactoryClass", "bookkeeperTLSClientAuthentication", "bookkeeperTLSKeyFileType",
    "bookkeeperTLSTrustCertTypes", "bookkeeperTLSKeyStorePasswordPath", "bookkeeperTLSTrustStorePasswordPath",
    "bookkeeperTLSKeyFilePath", "bookkeeperTLSCertificateFilePath", "bookkeeperTLSTrustCertsFilePath",
    "bookkeeperTlsCertFilesRefreshDurationSeconds", "bookkeeperExplicitLacIntervalInMills",
    "bookkeeperClientExposeStatsToPrometheus", "bookkeeperClientLimitStatsLogging",
})
"""The BookKeeper-client keys of Pulsar's `broker.conf` (its isolation-group keys are placement keys,
in `policies.settings.KNOWN_KEYS`)."""

PULSAR_PASS_THROUGH = "bookkeeper_"
"""Pulsar hands `bookkeeper_<key>=v` to its BookKeeper client as `<key>=v`; the engine does not."""

__all__ = ["BOOKKEEPER_CLIENT_KEYS", "BOOKKEEPER_SERVER_KEYS", "LOCATION_SOURCE_KEYS", "PULSAR_BROKER_KEYS",
           "PULSAR_DEFAULT_SHAPE", "PULSAR_MIN_AVAILABLE_IN_GROUPS", "PULSAR_PASS_THROUGH",
           "PULSAR_REGIONAWARE_SWITCH", "PULSAR_SHAPE_KEYS", "PULSAR_TRANSLATED"]
